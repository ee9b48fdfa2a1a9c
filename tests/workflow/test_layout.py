"""``workflow.layout``: the plan in layers, loops bent back, the same picture every time."""

from __future__ import annotations

from plait.workflow.definition import EdgeDef, NodeDef, Workflow
from plait.workflow.layout import lay_out, layers


def flow(nodes: list[str], edges: list[EdgeDef]) -> Workflow:
    return Workflow("w", nodes=tuple(NodeDef(id=n, kind="tool", tool="t") for n in nodes),
                    edges=tuple(edges))  # fmt: skip


def test_a_node_sits_below_every_node_that_leads_to_it():
    wf = flow(["a", "b", "c", "d"], [EdgeDef("a", "b"), EdgeDef("a", "c"), EdgeDef("b", "d"),
                                     EdgeDef("c", "d")])  # fmt: skip
    assert layers(wf) == {"a": 0, "b": 1, "c": 1, "d": 2}
    placed = {p.id: p for p in lay_out(wf).nodes}
    assert placed["b"].y == placed["c"].y and placed["b"].x < placed["c"].x  # plan order
    assert placed["a"].y < placed["b"].y < placed["d"].y


def test_a_loop_edge_is_drawn_back_and_does_not_push_layers():
    wf = flow(["step", "finish"], [EdgeDef("step", "step", "i < 3", 5), EdgeDef("step", "finish")])
    drawn = lay_out(wf)
    assert layers(wf) == {"step": 0, "finish": 1}
    loop = next(e for e in drawn.edges if e.src == e.dst)
    assert loop.loop and loop.label == "i < 3 · max 5"
    assert lay_out(wf) == drawn  # pure


def test_every_box_fits_inside_the_picture():
    names = [f"n{i}" for i in range(6)]
    wf = flow(names, [EdgeDef("n0", n) for n in names[1:]])
    drawn = lay_out(wf)
    for p in drawn.nodes:
        assert p.x >= 0 and p.x + p.w <= drawn.width and p.y + p.h <= drawn.height
