"""Tools that record every execution (run, node, task path, key) in a side file.

The side file is ``count_file`` (a context key, or a Send task's input key); each line
is ``run_id node task_path attempt idempotency_key`` (task path ``-`` outside Send tasks).
"""

from plait import current_call


def _count(count_file: str) -> str:
    call = current_call()
    assert call is not None
    with open(count_file, "a") as f:
        path = call.task_path or "-"
        f.write(f"{call.run_id} {call.node} {path} {call.attempt} {call.idempotency_key}\n")
    return call.node


def mark(count_file: str) -> dict:
    """A step of a chain: records itself under its node's id."""
    node = _count(count_file)
    return {node: "done", "log": node}


def after(count_file: str, approved: bool, by: str) -> dict:
    node = _count(count_file)
    return {"log": f"{node}: approved={approved} by {by}"}


def spawn(count_file: str, n: int) -> dict:
    _count(count_file)
    return {
        "$send": [{"node": "square", "input": {"count_file": count_file, "x": x}} for x in range(n)]
    }


def square(count_file: str, x: int) -> dict:
    _count(count_file)
    return {"squares": [x * x], "log": f"square {x}"}


def join(count_file: str, squares: list) -> dict:
    _count(count_file)
    return {"total": sum(squares), "log": "join"}


def noted(count_file: str, note: str) -> dict:
    node = _count(count_file)
    return {"log": f"{node}: {note}"}
