"""Tools of the decision tests: a support desk's and a devops team's."""


def lookup_order(order_id: str) -> dict:
    return {"order_id": order_id, "status": "delivered"}


def issue_refund(order_id: str) -> dict:
    return {"refunded": order_id}


def restart_service(service: str) -> dict:
    return {"restarted": service}


def list_files(path: str) -> dict:
    return {"files": [path + "/a.txt"]}


def lookup(q: str) -> dict:
    return {"q": q, "found": True}
