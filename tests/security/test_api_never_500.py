"""A property (issue #20 acceptance): whatever path, query and body a client sends, with
whichever token, the API answers with a PLAIT error object or a result — never a 500.
The app runs in-process (``TestClient``, server exceptions turned into answers, as a real
server would send them) on a real SQLite file, with a token per role."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.server import create_app
from plait.server.roles import ROUTE_ACTIONS
from plait.server.tokens import add_token
from plait.store import open_store
from serve_driver.support import FLOW_DIRS

TRUSTED = "trusted-token-for-properties"
ROLES = ("viewer", "operator", "approver", "admin")

segments = st.one_of(
    st.sampled_from(["r1", "..", ".", "%2F", "a\x00b", "x" * 300, "%00", "~", "é", "question"]),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
)
paths = st.one_of(
    st.sampled_from(
        ["question.yaml", "../x.yaml", "/dev/zero", "/etc/passwd", "a\x00.yaml", "q" * 300,
         "approval.yaml", "", ".", "hitl_tools.py", "/proc/self/environ", "caf\u00e9.yaml"]
    ),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=60),
)  # fmt: skip
"""Workflow paths; no lone surrogates: no client can send one (they are not UTF-8)."""
finite = st.floats(allow_nan=False, allow_infinity=False)  # what a JSON client can send
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"workflow": paths},
        optional={
            "model": st.text(max_size=30),
            "as": st.text(max_size=10),
            "input": json_values,
            "run_id": st.text(max_size=20),
            "set": st.dictionaries(st.text(max_size=5), json_values),
            "at": st.integers(),
            "budget": st.dictionaries(st.text(max_size=8), json_values),
        },
    ),
)


def build(folder: Path) -> tuple[TestClient, dict[str, str]]:
    for item in FLOW_DIRS[0].iterdir():
        if item.is_file():
            shutil.copy(item, folder / item.name)
    db = f"sqlite:///{folder}/plait.db"
    store = open_store(db)
    try:
        tokens = {role: add_token(store, f"p-{role}", role, 1)["token"] for role in ROLES}
    finally:
        store.close()
    app = create_app(TRUSTED, db=db, poll_s=0.0, workflows=folder)
    return TestClient(app, raise_server_exceptions=False), {**tokens, "trusted": TRUSTED}


def concrete(template: str, values: list[str]) -> str:
    parts = []
    for part in template.split("/"):
        if part.startswith("{"):
            parts.append(quote(values.pop() if values else "x", safe=""))
        else:
            parts.append(part)
    return "/".join(parts)


def test_the_api_never_answers_500(tmp_path: Path):
    client, tokens = build(tmp_path)
    routes = sorted(ROUTE_ACTIONS)

    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        route=st.sampled_from(routes),
        ids=st.lists(segments, min_size=2, max_size=2),
        role=st.sampled_from([*tokens, "none", "bogus"]),
        body=bodies,
        path_param=paths,
        raw=st.booleans(),
    )
    def probe(
        route: tuple[str, str], ids: list[str], role: str, body: Any, path_param: str, raw: bool
    ) -> None:
        method, template = route
        url = concrete(template, list(ids))
        headers = {"Authorization": f"Bearer {tokens.get(role, role)}"}
        params = {"path": path_param} if template == "/workflows/graph" else {}
        if template.endswith("/events"):
            params = {"after": "0"}
        if raw:  # bytes that are not JSON at all
            content = str(body).encode("utf-8", "surrogatepass")
            response = client.request(
                method, url, content=content, params=params,
                headers={**headers, "content-type": "application/json"},
            )  # fmt: skip
        else:
            response = client.request(method, url, json=body, params=params, headers=headers)
        assert response.status_code < 500 or response.status_code == 503, (
            method, url, role, body, response.text,
        )  # fmt: skip
        if response.status_code >= 400 and response.status_code not in (404, 405):
            assert response.json()["error"]["code"].startswith("PLAIT-E"), response.text
        # 404/405 without an error object: no route matched (an empty segment, say)

    with client:
        probe()
