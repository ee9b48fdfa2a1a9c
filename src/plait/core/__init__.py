"""The deterministic core: a pure scheduler and the values it works on.

Nothing in this package reads a clock, randomness, the environment or any IO,
and nothing depends on unsorted iteration order. It imports only the standard
library and itself (a test parses every module to keep it that way).
"""
