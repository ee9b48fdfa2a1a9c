"""The host side: performs the core's commands, executes effects, journals.

Everything that touches the outside world (clocks, threads, tools, storage)
lives here, never in ``plait.core``.
"""
