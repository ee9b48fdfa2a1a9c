"""The tool of the schedule tests' workflows."""


def tick(n: int = 0) -> dict:
    return {"ticked": n + 1}
