"""The edge condition language (docs/architecture.md §3.6): parse once at load, evaluate per edge.

A condition is a small, total language over the run context. The grammar::

    expr     := and_expr ("or" and_expr)*
    and_expr := unary ("and" unary)*
    unary    := ("!" | "not") (path | "(" expr ")")
              | "(" expr ")"
              | path [op literal | "exists"]
    op       := "==" | "!=" | "<" | "<=" | ">" | ">="
    path     := segment ("." segment)*        segment := [A-Za-z0-9_-]+
    literal  := a JSON string, a JSON number, true, false or null

``and``, ``or`` and ``not`` are reserved as whole paths (``a.and`` is still a path);
``exists``, ``true``, ``false`` and ``null`` are ordinary keys on the left-hand side.
Ordering operators take a number literal only. ``!a == 1`` is refused as ambiguous:
write ``!(a == 1)``.

This module must never use ``eval``, let ``evaluate`` raise, coerce types when comparing
(``"1" != 1``, ``1 != 1.0``, ``true != 1``) or read anything but the context it is given.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final, TypeAlias

from plait.core.canonical import JSON, CanonicalJSONError, loads, strict_equal

__all__ = ["Condition", "ConditionError", "evaluate", "parse_condition"]

_SEGMENT_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
)
_DIGITS: Final = frozenset("0123456789")
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_WS: Final = frozenset(" \t\n\r")
_OP_CHARS: Final = frozenset("=!<>")
_OPERATORS: Final = ("==", "!=", "<", "<=", ">", ">=")
_ORDERING: Final = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_RESERVED: Final = frozenset({"and", "or", "not"})
_MAX_DEPTH: Final = 32
"""Parenthesis nesting limit: keeps parsing and evaluation far from Python's recursion limit."""


class ConditionError(ValueError):
    """A condition that does not parse; ``position`` is a 0-based offset into the source."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(frozen=True)
class Compare:
    """``path <op> literal``; ``literal`` is a JSON scalar (a number for ordering ops)."""

    path: tuple[str, ...]
    op: str
    literal: JSON


@dataclass(frozen=True)
class Exists:
    """``path exists``: true when the path is present, even if its value is null."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class Truthy:
    """A bare ``path``: true unless missing, false, null, "", 0, 0.0, [] or {}."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class Not:
    """``!x`` / ``not x``."""

    operand: Node


@dataclass(frozen=True)
class And:
    """``a and b and ...``, flattened so long chains do not nest."""

    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """``a or b or ...``, flattened so long chains do not nest."""

    operands: tuple[Node, ...]


Node: TypeAlias = Compare | Exists | Truthy | Not | And | Or


@dataclass(frozen=True)
class Condition:
    """A parsed condition. ``source`` is its canonical form: re-parsing it gives ``root``."""

    source: str
    root: Node
    holds: Callable[[JSON], bool] = field(init=False, compare=False, repr=False)
    """``evaluate`` of this condition, made once (see ``_evaluator``): edges are evaluated
    at every superstep, a loop's bound most of all."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "holds", _evaluator(self.root))

    def __str__(self) -> str:
        return self.source


# ---------------------------------------------------------------------------------------------
# Evaluation: a plain tree walk, total over any JSON context.


_MISSING: Final = object()


def evaluate(cond: Condition, context: JSON) -> bool:
    """Whether ``cond`` holds over ``context``. Never raises for a JSON context."""
    return cond.holds(context)


def _evaluator(root: Node) -> Callable[[JSON], bool]:
    """``_eval`` of ``root`` as a one-argument function. A top-level key ordered against a
    number (``i < 10``: a loop's bound, the commonest condition) gets a function of its
    own that does what ``_eval`` does for it in one frame instead of three; any other
    condition is ``_eval`` itself."""
    if not (
        isinstance(root, Compare)
        and len(root.path) == 1
        and root.op in _ORDERING
        and type(root.literal) in _PLAIN_NUMBERS
    ):
        return partial(_eval, root)
    key, op, literal, compare = root.path[0], root.op, root.literal, _ORDERING[root.op]

    def holds(context: JSON) -> bool:
        value: JSON = context.get(key, _MISSING) if isinstance(context, dict) else _MISSING
        if type(value) in _PLAIN_NUMBERS:
            return compare(value, literal) is True  # (a plain number's ordering is a bool)
        return _ordered(op, value, literal)

    return holds


def _eval(node: Node, context: JSON) -> bool:
    if isinstance(node, Compare):
        value = _lookup(context, node.path)
        op = node.op
        if op == "==":
            return value is not _MISSING and strict_equal(value, node.literal)
        if op == "!=":
            return value is _MISSING or not strict_equal(value, node.literal)
        literal = node.literal
        compare = _ORDERING.get(op)
        if (
            compare is not None
            and type(value) in _PLAIN_NUMBERS
            and type(literal) in _PLAIN_NUMBERS
        ):
            return bool(compare(value, literal))  # a loop's counter against its bound
        return _ordered(op, value, literal)
    if isinstance(node, Truthy):
        value = _lookup(context, node.path)
        return value is not _MISSING and bool(value)
    if isinstance(node, Exists):
        return _lookup(context, node.path) is not _MISSING
    if isinstance(node, Not):
        return not _eval(node.operand, context)
    if isinstance(node, And):
        return all(_eval(operand, context) for operand in node.operands)
    return any(_eval(operand, context) for operand in node.operands)


def _lookup(context: JSON, path: tuple[str, ...]) -> JSON:
    """The value at ``path``, or ``_MISSING`` when any step is absent or not an object."""
    value = context
    for segment in path:
        if not isinstance(value, dict):
            return _MISSING
        value = value.get(segment, _MISSING)
    return value


def _is_number(value: JSON) -> bool:
    kind = type(value)
    if kind is int or kind is float:
        return True
    return isinstance(value, _NUMBERS) and not isinstance(value, bool)


_NUMBERS: Final = (int, float)
_PLAIN_NUMBERS: Final = frozenset((int, float))


def _ordered(op: str, value: JSON, literal: JSON) -> bool:
    """Numeric ordering; int and float compare by value here (and only here)."""
    compare = _ORDERING.get(op)
    return bool(compare and _is_number(value) and _is_number(literal) and compare(value, literal))


# ---------------------------------------------------------------------------------------------
# Parsing: scannerless recursive descent. Each function takes the text and a position and
# returns what it parsed with the position just after it.


def parse_condition(text: str) -> Condition:
    """Parse ``text``; raises ConditionError saying what was expected, what was found, where."""
    if not isinstance(text, str):
        raise ConditionError(f"a condition must be a string, got {type(text).__name__}", 0)
    root, pos = _parse_or(text, 0, 0)
    pos = _skip_ws(text, pos)
    if pos < len(text):
        raise _expected(text, pos, "'and', 'or' or end of condition")
    return Condition(text, root)


def _skip_ws(text: str, pos: int) -> int:
    return _run_end(text, pos, _WS)


def _run_end(text: str, pos: int, chars: frozenset[str]) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _found(text: str, pos: int) -> str:
    """How the thing at ``pos`` reads in an error message."""
    if pos >= len(text):
        return "end of condition"
    char = text[pos]
    if char in _WS:
        return "whitespace"
    for chars in (_SEGMENT_CHARS, _OP_CHARS):
        if char in chars:
            token = text[pos : _run_end(text, pos, chars)]
            return f"'{token[:24]}...'" if len(token) > 24 else f"'{token}'"
    return repr(char)


def _expected(text: str, pos: int, what: str, hint: str = "") -> ConditionError:
    return ConditionError(
        f"expected {what} at position {pos}, found {_found(text, pos)}{hint}", pos
    )


def _keyword_at(text: str, pos: int, keywords: str) -> bool:
    """Whether one of the ``|``-separated ``keywords`` stands as a whole word at ``pos``."""
    return text[pos : _run_end(text, pos, _SEGMENT_CHARS)] in keywords.split("|")


def _reserved_at(text: str, pos: int) -> bool:
    """A reserved word standing alone (``a.and`` is a path, ``and`` is not)."""
    end = _run_end(text, pos, _SEGMENT_CHARS)
    return text[pos:end] in _RESERVED and not text.startswith(".", end)


def _closers(depth: int) -> str:
    return "'and', 'or', ')' or end of condition" if depth else "'and', 'or' or end of condition"


def _parse_or(text: str, pos: int, depth: int) -> tuple[Node, int]:
    node, pos = _parse_and(text, pos, depth, "")
    operands = [node]
    while _keyword_at(text, at := _skip_ws(text, pos), "or"):
        node, pos = _parse_and(text, at + 2, depth, " after 'or'")
        operands.append(node)
    return (operands[0] if len(operands) == 1 else Or(tuple(operands))), pos


def _parse_and(text: str, pos: int, depth: int, after: str) -> tuple[Node, int]:
    node, pos = _parse_unary(text, pos, depth, after)
    operands = [node]
    while _keyword_at(text, at := _skip_ws(text, pos), "and"):
        node, pos = _parse_unary(text, at + 3, depth, " after 'and'")
        operands.append(node)
    return (operands[0] if len(operands) == 1 else And(tuple(operands))), pos


def _parse_unary(text: str, pos: int, depth: int, after: str) -> tuple[Node, int]:
    pos = _skip_ws(text, pos)
    char = text[pos] if pos < len(text) else ""
    if char == "!":
        return _parse_negation(text, pos + 1, depth, "'!'")
    if char == "(":
        return _parse_group(text, pos, depth)
    if char and char in _SEGMENT_CHARS:
        if _keyword_at(text, pos, "not") and not text.startswith(".", pos + 3):
            return _parse_negation(text, pos + 3, depth, "'not'")
        if not _reserved_at(text, pos):
            path, end = _parse_path(text, pos)
            return _parse_after_path(text, path, end, depth)
    raise _expected(text, pos, f"a path{after}")


def _parse_negation(text: str, pos: int, depth: int, name: str) -> tuple[Node, int]:
    pos = _skip_ws(text, pos)
    if text.startswith("(", pos):
        inner, pos = _parse_group(text, pos, depth)
        return Not(inner), pos
    if pos < len(text) and text[pos] in _SEGMENT_CHARS and not _reserved_at(text, pos):
        path, pos = _parse_path(text, pos)
        at = _skip_ws(text, pos)
        if text[at : at + 1] in _OP_CHARS or _keyword_at(text, at, "exists"):
            hint = f"; to negate a comparison write {name[1:-1]}( ... ) around it"
            raise _expected(text, at, f"{_closers(depth)} after a negated path", hint)
        return Not(Truthy(path)), pos
    raise _expected(text, pos, f"a path or '(' after {name}")


def _parse_group(text: str, pos: int, depth: int) -> tuple[Node, int]:
    if depth >= _MAX_DEPTH:
        raise ConditionError(
            f"parentheses nested too deeply at position {pos} (the limit is {_MAX_DEPTH})", pos
        )
    inner, end = _parse_or(text, pos + 1, depth + 1)
    end = _skip_ws(text, end)
    if not text.startswith(")", end):
        raise _expected(text, end, "'and', 'or' or ')'", f" (unclosed '(' at position {pos})")
    return inner, end + 1


def _parse_path(text: str, pos: int) -> tuple[tuple[str, ...], int]:
    segments: list[str] = []
    while True:
        end = _run_end(text, pos, _SEGMENT_CHARS)
        if end == pos:
            raise _expected(text, pos, "a path segment after '.'")
        segments.append(text[pos:end])
        if not text.startswith(".", end):
            return tuple(segments), end
        pos = end + 1


def _parse_after_path(text: str, path: tuple[str, ...], pos: int, depth: int) -> tuple[Node, int]:
    at = _skip_ws(text, pos)
    char = text[at : at + 1]
    if not char or (char == ")" and depth) or _keyword_at(text, at, "and|or"):
        return Truthy(path), pos
    if _keyword_at(text, at, "exists"):
        return Exists(path), at + len("exists")
    if char in _OP_CHARS:
        end = _run_end(text, at, _OP_CHARS)
        op = text[at:end]
        if op not in _OPERATORS:
            hint = " (did you mean '=='?)" if op == "=" else ""
            message = f"unknown operator '{op}' at position {at}{hint}; expected one of"
            raise ConditionError(f"{message} {', '.join(_OPERATORS)}", at)
        literal, end = _parse_literal(text, end, op)
        return Compare(path, op, literal), end
    operators = ", ".join(f"'{op}'" for op in _OPERATORS)
    raise _expected(text, at, f"{operators}, 'exists', {_closers(depth)}")


def _parse_literal(text: str, pos: int, op: str) -> tuple[JSON, int]:
    pos = _skip_ws(text, pos)
    char = text[pos] if pos < len(text) else ""
    value: JSON
    if char == '"':
        value, end = _scan_string(text, pos)
    elif char == "-" or char in _DIGITS:
        value, end = _scan_number(text, pos)
    elif char and char in _SEGMENT_CHARS:
        end = _run_end(text, pos, _SEGMENT_CHARS)
        words: dict[str, JSON] = {"true": True, "false": False, "null": None}
        if text[pos:end] not in words:
            hint = " (strings need double quotes)"
            raise _expected(text, pos, f"a literal after '{op}'", hint)
        value = words[text[pos:end]]
    else:
        hint = " (object and array literals are not allowed)" if char in ("{", "[") else ""
        raise _expected(text, pos, f"a literal after '{op}'", hint)
    if op in _ORDERING and not _is_number(value):
        found = "a string" if isinstance(value, str) else text[pos:end]
        message = f"expected a number after '{op}' at position {pos}, found {found}"
        raise ConditionError(f"{message} (ordering compares numbers only)", pos)
    return value, end


def _scan_string(text: str, start: int) -> tuple[str, int]:
    """A JSON string literal starting at the opening quote; escapes are checked before decoding."""
    pos = start + 1
    while pos < len(text):
        char = text[pos]
        if char == '"':
            try:
                value = str(loads(text[start : pos + 1]))
                value.encode("utf-8")
            except (CanonicalJSONError, UnicodeEncodeError) as exc:
                message = f"string literal at position {start} is not valid UTF-8 text"
                raise ConditionError(message, start) from exc
            return value, pos + 1
        if char == "\\":
            escape = text[pos + 1 : pos + 2]
            if escape == "u":
                digits = text[pos + 2 : pos + 6]
                if len(digits) != 4 or not all(d in _HEX for d in digits):
                    message = f"invalid \\u escape at position {pos}: expected 4 hex digits"
                    raise ConditionError(message, pos)
                pos += 6
                continue
            if not escape or escape not in '"\\/bfnrt':
                shown = f"'\\{escape}'" if escape else "'\\' at end of condition"
                raise ConditionError(f"invalid escape {shown} at position {pos}", pos)
            pos += 2
            continue
        if ord(char) < 0x20:
            message = f"unescaped control character {char!r} in string literal at position {pos}"
            raise ConditionError(message, pos)
        pos += 1
    hint = f" (unterminated string starting at position {start})"
    raise _expected(text, pos, "'\"'", hint)


def _scan_number(text: str, start: int) -> tuple[int | float, int]:
    """A JSON number literal: ``1`` is an int, ``1.0`` and ``1e3`` are floats."""
    pos = start + 1 if text[start] == "-" else start
    if text[pos : pos + 1] not in _DIGITS:
        raise _expected(text, pos, "a digit")
    if text[pos] == "0":
        pos += 1
        if pos < len(text) and text[pos] in _DIGITS:
            raise ConditionError(f"leading zero in number literal at position {pos - 1}", pos - 1)
    else:
        pos = _run_end(text, pos, _DIGITS)
    is_float = False
    if text.startswith(".", pos):
        is_float, pos = True, pos + 1
        if text[pos : pos + 1] not in _DIGITS:
            raise _expected(text, pos, "a digit after '.'")
        pos = _run_end(text, pos, _DIGITS)
    if pos < len(text) and text[pos] in "eE":
        is_float, pos = True, pos + 1
        if pos < len(text) and text[pos] in "+-":
            pos += 1
        if text[pos : pos + 1] not in _DIGITS:
            raise _expected(text, pos, "a digit in the exponent")
        pos = _run_end(text, pos, _DIGITS)
    if pos < len(text) and (text[pos] in _SEGMENT_CHARS or text[pos] == "."):
        raise _expected(text, pos, "the end of the number")
    token = text[start:pos]
    if is_float:
        number = float(token)
        if not math.isfinite(number):
            raise ConditionError(f"number literal out of range at position {start}", start)
        return number, pos
    try:
        return int(token), pos
    except ValueError as exc:  # more digits than int() accepts
        raise ConditionError(f"number literal too long at position {start}", start) from exc
