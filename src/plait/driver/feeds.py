"""Journaled event batches ("feeds"): what each ``step`` call was given.

Every batch of events the driver feeds the core is journaled in the same
transaction as what that step produced. Verify replays exactly these batches,
in order, answering effect results from the journal by key: one general
mechanism for waves, starts, resumes, cancels, answers, steering messages and
budget raises alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plait.core.canonical import CanonicalJSONError, canonical_text, loads
from plait.core.events import (
    BudgetRaised,
    CancelSeen,
    ClockReading,
    EffectResolved,
    Event,
    InputReceived,
    ResponseSettled,
    Start,
)
from plait.core.keys import JournalKey
from plait.core.outcomes import NO_USAGE, Completed, EffectOutcome
from plait.store.chunks import whole_shape
from plait.store.rows import key_text

FEED = "feed"

_NO_USAGE_TEXT = canonical_text(NO_USAGE.to_json())
_WAVE_HEAD = '{"events":[{"clock":'
_RESOLVED = ',{"resolved":'
_COMPLETED_HEAD = '{"Completed":{"result":'
_NO_USAGE_TAIL = ',"usage":' + _NO_USAGE_TEXT + "}}"


def encode_events(events: Sequence[Event]) -> list[dict[str, Any]]:
    """Events as JSON; results are referenced by key (the result itself is journaled once)."""
    out: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, ClockReading):
            out.append({"clock": event.unix_ms})
        elif isinstance(event, EffectResolved):
            out.append({"resolved": event.key.to_json()})
        elif isinstance(event, Start):
            out.append({"start": event.input})
        elif isinstance(event, CancelSeen):
            out.append({"cancel": [event.by, event.reason]})
        elif isinstance(event, InputReceived):
            out.append({"input": event.message})
        elif isinstance(event, BudgetRaised):
            out.append({"budget_raised": event.budgets})
        elif isinstance(event, ResponseSettled):
            out.append({"settled": event.ask_id})
    return out


def wave_feed(events: Sequence[Event]) -> tuple[dict[str, Any], str] | None:
    """The body ``{"events": encode_events(events)}`` and its canonical text (what
    ``feed_text`` writes) of a wave's feed, built in one pass: a clock reading, then the
    results the wave's effects came back with (nearly every feed; the inverse of
    ``wave_of_text``). None for any other batch: the caller takes the general way."""
    if not events:
        return None
    clock = events[0]
    if type(clock) is not ClockReading or type(clock.unix_ms) is not int:
        return None
    unix_ms = clock.unix_ms
    encoded: list[dict[str, Any]] = [{"clock": unix_ms}]
    text = _WAVE_HEAD + str(unix_ms) + "}"
    try:
        for event in events[1:]:
            if type(event) is not EffectResolved:
                return None
            key = event.key
            encoded.append({"resolved": key.to_json()})
            text += _RESOLVED + key_text(key) + "}"
    except (ValueError, TypeError, RecursionError):
        return None  # a key with no canonical text: the general way says why
    return {"events": encoded}, text + "]}"


def feed_text(events: Sequence[Event], encoded: list[dict[str, Any]]) -> str | None:
    """The canonical text of a feed body ``{"events": encoded}`` (``encoded`` being
    ``encode_events(events)``), written piece by piece: a wave's clock reading and the
    keys of its results (whose texts are remembered) need no encoding of their own.
    None when a piece has no canonical text (the store's encoder then says why)."""
    pieces: list[str] = []
    try:
        for event, item in zip(events, encoded, strict=True):
            if type(event) is ClockReading and type(event.unix_ms) is int:
                pieces.append('{"clock":' + str(event.unix_ms) + "}")
            elif type(event) is EffectResolved:
                pieces.append('{"resolved":' + key_text(event.key) + "}")
            else:
                pieces.append(canonical_text(item))
    except (ValueError, TypeError, RecursionError):
        return None
    return '{"events":[' + ",".join(pieces) + "]}"


def outcome_text(outcome: EffectOutcome) -> str | None:
    """The canonical text of ``outcome.to_json()`` when the outcome carries its result's
    text (a tool's result, encoded once when it returned), else None."""
    if type(outcome) is not Completed or outcome.text is None:
        return None
    usage = outcome.usage
    usage_text = _NO_USAGE_TEXT if usage is NO_USAGE else canonical_text(usage.to_json())
    return '{"Completed":{"result":' + outcome.text + ',"usage":' + usage_text + "}}"


def completed_of_text(text: str) -> Completed | None:
    """The inverse of ``outcome_text`` for a tool's result without usage, from the text of a
    result row (a tool's result, nearly every row), parsing only the result's own text:
    not the wrapper and the usage around it, nor rebuilding the usage (``NO_USAGE``).

    The text is ``{"Completed":{"result":`` + R + ``,"usage":`` + NO_USAGE's text + ``}}``
    exactly, and R parses as one value: then the whole text parses, to an outcome whose
    result is R's value and whose usage is NO_USAGE, what ``outcome_from_json`` of the
    whole would build. None for any other text (or an R that does not parse): the caller
    parses the whole text, which says what is wrong with it."""
    if not (text.startswith(_COMPLETED_HEAD) and text.endswith(_NO_USAGE_TAIL)):
        return None
    return completed_of_part(text[len(_COMPLETED_HEAD) : -len(_NO_USAGE_TAIL)])


COMPLETED_SHAPE = whole_shape(_COMPLETED_HEAD, _NO_USAGE_TAIL)
"""A result row kept whole whose text ``completed_of_text`` reads: its part between is R."""


def completed_of_part(part: str) -> Completed | None:
    """``completed_of_text`` of ``_COMPLETED_HEAD + part + _NO_USAGE_TAIL``: from R alone
    (``COMPLETED_SHAPE``, a row's text never taken out whole)."""
    try:
        result = loads(part)
    except CanonicalJSONError:
        return None
    return Completed(result)


def wave_of_text(
    text: str,
    keys: Mapping[str, JournalKey],
    result_of: Callable[[JournalKey], EffectOutcome | None],
) -> list[Event] | None:
    """The inverse of ``feed_text`` for a wave's feed (a clock reading, then the results
    the wave's effects came back with, by key: nearly every feed), from the feed row's
    text, without parsing it: ``keys`` are the journal's result keys by the text of their
    ``journal_key`` column (parsed already), which is what ``feed_text`` writes for them.

    The text is ``{"events":[{"clock":`` + N + ``}`` + (``,{"resolved":`` + K + ``}``)...
    + ``]}`` exactly, N a canonical non-negative integer and each K one of ``keys``: then
    the whole text parses, to a clock reading of N and one ``EffectResolved`` per K, what
    ``decode_events`` builds from the parsed text (a split cannot fall inside a key's text:
    ``{"`` never occurs inside a JSON string, where ``"`` is always escaped). None for any
    other text, or a result ``result_of`` does not have: the caller parses the text."""
    if not (text.startswith(_WAVE_HEAD) and text.endswith(_WAVE_TAIL)):
        return None
    return wave_of_part(text[len(_WAVE_HEAD) : -len(_WAVE_TAIL)], keys, result_of)


_WAVE_TAIL = "}]}"
WAVE_SHAPE = whole_shape(_WAVE_HEAD, _WAVE_TAIL)
"""A feed row kept whole whose text ``wave_of_text`` reads, and the part between."""


def wave_of_part(
    part: str,
    keys: Mapping[str, JournalKey],
    result_of: Callable[[JournalKey], EffectOutcome | None],
) -> list[Event] | None:
    """``wave_of_text`` of ``_WAVE_HEAD + part + _WAVE_TAIL`` (``WAVE_SHAPE``, a row's text
    never taken out whole)."""
    clock, _, rest = (part + "}").partition("}")
    if not (clock.isascii() and clock.isdigit() and (clock == "0" or clock[0] != "0")):
        return None
    first, *resolved = rest.split(_RESOLVED)
    if first:
        return None
    events: list[Event] = [ClockReading(int(clock))]
    for piece in resolved:
        key = keys.get(piece[:-1]) if piece.endswith("}") else None
        outcome = None if key is None else result_of(key)
        if key is None or outcome is None:
            return None
        events.append(EffectResolved(key, outcome))
    return events


def decode_events(
    encoded: Sequence[dict[str, Any]],
    result_of: Callable[[JournalKey], EffectOutcome | None],
    answer_of: Callable[[str], EffectOutcome | None],
) -> list[Event] | JournalKey | str:
    """Rebuild a journaled batch; returns the missing key (or ask id) if a result is absent."""
    events: list[Event] = []
    for item in encoded:
        if "clock" in item:
            events.append(ClockReading(int(item["clock"])))
        elif "resolved" in item:
            key = JournalKey.from_json(item["resolved"])
            outcome = result_of(key)
            if outcome is None:
                return key
            events.append(EffectResolved(key, outcome))
        elif "start" in item:
            events.append(Start(item["start"]))
        elif "cancel" in item:
            events.append(CancelSeen(item["cancel"][0], item["cancel"][1]))
        elif "input" in item:
            events.append(InputReceived(item["input"]))
        elif "budget_raised" in item:
            events.append(BudgetRaised(item["budget_raised"]))
        elif "settled" in item:
            answer = answer_of(item["settled"])
            if answer is None:
                return str(item["settled"])
            events.append(ResponseSettled(item["settled"], answer))
    return events
