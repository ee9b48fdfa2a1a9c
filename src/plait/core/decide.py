"""Decisions of an abstract node's loop (docs/architecture.md §6.6): the tool offer (C1)
and decision-guided folding (C2), asked of the decision backend the manifest pinned.

A decision is a journaled ``decide`` effect: its intent is a typed question (``score``:
one probability per item), its result the backend's answer with provenance. The core
only reads the answer; it never runs a model, so ``plait verify`` replays a decision
from the journal with no backend installed.

Rules of this file:
- Nothing here runs unless ``StepEnv.decide`` is set (``llm.decide`` in the manifest);
  every field it writes is omitted from checkpoints at its default.
- C1 narrows once, before the loop's first turn; the tools the governance flow needs
  now (the active steps' tools and its ambient ones) are always kept, and the model may
  widen the offer once with the built-in ``more_tools`` call (its answer is a tool entry,
  no effect: the call itself is journaled in the turn's result).
- C2 omits only whole tool pairs (an assistant entry with tool calls and its results),
  and only when the backend is calibrated; otherwise, or when the transcript is still
  too long afterwards, the summarizer folds (``decide_fold_tried``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plait.core.abstract import NEXT_TURN, AbstractFlow
from plait.core.canonical import dumps
from plait.core.env import StepEnv
from plait.core.outcomes import Completed, EffectOutcome
from plait.core.transcript import Entry

DECIDE_EXECUTOR = "$decide"
"""The executor of a decision; no tool can be named so (a tool node named ``decide`` runs
its tool as executor ``decide``)."""
MORE_TOOLS = "more_tools"
MORE_TOOLS_DESCRIPTION = (
    "Call this (no arguments) when none of the offered tools fits the task: every tool"
    " of this agent is offered from the next turn on."
)
DEFAULT_MAX_TOOLS = 8
QUERY_CHARS = 2000
"""A question's query and each item's text are cut here: the model reads far less."""


def settings(env: StepEnv) -> Mapping[str, Any]:
    return env.decide or {}


def calibrated(env: StepEnv) -> bool:
    """Only a backend whose calibration file the manifest pinned is calibrated."""
    return isinstance(settings(env).get("calibration"), Mapping)


def threshold(env: StepEnv) -> float:
    """The probability under which an item is not relevant: the calibrated threshold,
    else ``offer.min_p``, else 0 (top K only)."""
    offer = settings(env).get("offer") or {}
    if "min_p" in offer:
        return float(offer["min_p"])
    calibration = settings(env).get("calibration")
    return float(calibration["threshold"]) if isinstance(calibration, Mapping) else 0.0


def offer_due(env: StepEnv, flow: AbstractFlow) -> bool:
    """C1 is asked once per loop, before its first turn."""
    return (
        env.decide is not None
        and settings(env).get("offer") is not None
        and flow.offer is None
        and flow.deciding is None
    )


def fold_due(env: StepEnv, flow: AbstractFlow) -> bool:
    """C2 is asked when a fold is due, once per over-long window, and only of a
    calibrated backend (an uncalibrated one may never omit anything)."""
    return bool(settings(env).get("fold")) and calibrated(env) and not flow.decide_fold_tried


def query_text(flow: AbstractFlow) -> str:
    """What the decision is about: the node's instruction and its input."""
    first = flow.messages[0].get("content") if flow.messages else None
    if isinstance(first, dict):
        text = f"{first.get('instruction', '')}\n{dumps(first.get('context'))}"
    else:
        text = first if isinstance(first, str) else dumps(first)
    return text[:QUERY_CHARS]


def offer_question(
    flow: AbstractFlow, seq: int, tools: Sequence[str], keep: Sequence[str]
) -> dict[str, Any]:
    """The C1 question: a score for each tool the decision may drop (kept ones are not
    asked about); the driver scores a ``tool`` item on its pinned name, description and
    schema."""
    flow.deciding = {"seq": seq, "purpose": "offer", "tools": list(tools), "keep": list(keep)}
    asked = [t for t in tools if t not in keep]
    return {
        "type": "score",
        "purpose": "offer",
        "query": query_text(flow),
        "items": [{"id": t, "tool": t} for t in asked],
    }


def tool_pairs(messages: Sequence[Mapping[str, Any]], start: int, end: int) -> list[list[int]]:
    """Whole tool pairs inside ``[start, end)``: an assistant entry with tool calls and
    the tool entries right after it, as ``[first, last + 1]``."""
    pairs, i = [], start
    while i < end:
        entry = messages[i]
        if entry.get("role") == "assistant" and entry.get("tool_calls"):
            j = i + 1
            while j < end and messages[j].get("role") == "tool":
                j += 1
            whole = j == len(messages) or messages[j].get("role") != "tool"
            if j > i + 1 and whole:  # a pair whose results run past the range stays
                pairs.append([i, j])
            i = j
        else:
            i += 1
    return pairs


def fold_question(flow: AbstractFlow, seq: int, span: tuple[int, int]) -> dict[str, Any] | None:
    """The C2 question: for each whole tool pair in the fold range, the probability that
    the rest of the task still needs it; None when the range holds no whole pair."""
    pairs = tool_pairs(flow.messages, span[0], span[1])
    if not pairs:
        return None
    flow.deciding = {"seq": seq, "purpose": "fold", "pairs": pairs}
    items = [
        {"id": f"{a}-{b}", "text": dumps(list(flow.messages[a:b]))[:QUERY_CHARS]} for a, b in pairs
    ]
    return {"type": "score", "purpose": "fold", "query": query_text(flow), "items": items}


def _scores(outcome: EffectOutcome) -> tuple[list[float], dict[str, Any]] | None:
    if not isinstance(outcome, Completed) or not isinstance(outcome.result, dict):
        return None
    p = outcome.result.get("p")
    if not isinstance(p, list) or not all(isinstance(x, int | float) for x in p):
        return None
    return [float(x) for x in p], outcome.result


def on_decided(env: StepEnv, flow: AbstractFlow, seq: int, outcome: EffectOutcome) -> None:
    """Apply a decision's answer; a failed or malformed one decides nothing (the full
    offer, or the summarizer), so a broken backend never breaks a run."""
    deciding = flow.deciding
    assert deciding is not None and deciding["seq"] == seq
    flow.deciding = None
    flow.need = NEXT_TURN
    answer = _scores(outcome)
    if deciding["purpose"] == "offer":
        _apply_offer(env, flow, deciding, seq, answer, outcome)
    else:
        _apply_fold(env, flow, deciding, answer)


def _apply_offer(
    env: StepEnv,
    flow: AbstractFlow,
    deciding: Mapping[str, Any],
    seq: int,
    answer: tuple[list[float], dict[str, Any]] | None,
    outcome: EffectOutcome,
) -> None:
    tools, keep = list(deciding["tools"]), list(deciding["keep"])
    asked = [t for t in tools if t not in keep]
    offer: dict[str, Any] = {"seq": seq, "calibrated": calibrated(env)}
    if answer is None or len(answer[0]) != len(asked):
        why = outcome.detail if not isinstance(outcome, Completed) else "malformed answer"
        offer.update(tools=tools, failed=str(why)[:200])
        flow.offer = offer
        return
    scores, result = answer
    limit = int((settings(env).get("offer") or {}).get("max_tools", DEFAULT_MAX_TOOLS))
    floor = threshold(env)
    ranked = sorted(range(len(asked)), key=lambda i: (-scores[i], asked[i]))
    chosen = {asked[i] for i in ranked[:limit] if scores[i] >= floor}
    offer["tools"] = [t for t in tools if t in chosen or t in keep]
    for field in ("provider", "model", "latency_ms"):
        if field in result:
            offer[field] = result[field]
    flow.offer = offer


def _apply_fold(
    env: StepEnv,
    flow: AbstractFlow,
    deciding: Mapping[str, Any],
    answer: tuple[list[float], dict[str, Any]] | None,
) -> None:
    flow.decide_fold_tried = True  # whatever it omits, the next trigger summarizes
    pairs = list(deciding["pairs"])
    if answer is None or len(answer[0]) != len(pairs) or not calibrated(env):
        return
    floor = threshold(env)
    dropped = [pair for pair, p in zip(pairs, answer[0], strict=True) if p < floor]
    if not dropped:
        return
    for a, b in reversed(dropped):
        del flow.messages[a:b]
    flow.last_prompt_tokens = 0  # the next turn measures the shorter transcript
    flow.fold_forced = False


def narrowed(flow: AbstractFlow, tools: list[str], needed: Sequence[str]) -> list[str]:
    """The turn's tools (after governance) under the loop's offer, always with the tools
    the governed flow needs now (``needed``), and ``more_tools`` while the offer is
    narrowed and has not been widened."""
    offer = flow.offer
    if not isinstance(offer, dict) or offer.get("widened"):
        return tools
    allowed = {*(offer.get("tools") or ()), *needed}
    kept = [t for t in tools if t in allowed]
    return [*kept, MORE_TOOLS] if len(kept) < len(tools) else kept


def turn_offer(flow: AbstractFlow) -> dict[str, Any]:
    """The offer's provenance as each turn's journaled input carries it."""
    return dict(flow.offer) if isinstance(flow.offer, dict) else {}


def take_more_tools(
    flow: AbstractFlow, calls: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Entry]]:
    """Split the built-in ``more_tools`` calls off an answer: they widen the offer (once)
    and are answered at once; the other calls go on as usual."""
    if not isinstance(flow.offer, dict):
        return calls, []
    rest = [c for c in calls if c.get("name") != MORE_TOOLS]
    if len(rest) == len(calls):
        return calls, []
    first = not flow.offer.get("widened")
    flow.offer["widened"] = True
    text = (
        "every tool of this agent is offered from the next turn on"
        if first
        else "the offer was already widened: every tool is offered"
    )
    entries = [
        Entry(role="tool", tool_call_id=c.get("id"), content=text, is_error=False)
        for c in calls
        if c.get("name") == MORE_TOOLS
    ]
    return rest, entries
