"""YAML into values that remember their lines: a safe loader, stricter than PyYAML's.

It refuses duplicate keys, non-string keys, tags beyond plain JSON values, NaN
and infinities, integers with more digits than Python reads, characters YAML does not
allow (NUL and other control characters), and documents whose aliases expand past
``MAX_VALUES`` values or ``MAX_DEPTH`` levels; it reads ``1e5`` as a number and a
``?`` inside a flow scalar as text, as YAML 1.2 does. Problems are collected, not raised, so a file
reports all of them at once.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from plait.workflow.located import (
    MAX_DEPTH,
    MAX_VALUES,
    Found,
    LineList,
    LineMap,
    Refused,
    combine_surrogates,
    show,
)

_BLANKS = "\0 \t\r\n\x85\u2028\u2029"
_FLOW_INDICATORS = ",[]{}"


class _YamlLoader(yaml.SafeLoader):
    """A safe loader whose mappings and lists remember lines and which refuses duplicate keys."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.found: Found = []

    def scan_plain(self) -> yaml.ScalarToken:
        """Plain scalars as YAML 1.2 reads them in flow context: a '?' inside one is text.

        PyYAML (YAML 1.1) ends them at '?', which refuses ``{prompt: Approve?, approval: true}``.
        """
        if not self.flow_level:
            return super().scan_plain()
        start = end = self.get_mark()
        chunks: list[str] = []
        spaces: list[str] = []
        while self.peek() != "#":
            length = 0
            while not self._ends_flow_plain(length):
                length += 1
            if length == 0:
                break
            self.allow_simple_key = False
            chunks += [*spaces, self.prefix(length)]
            self.forward(length)
            end = self.get_mark()
            spaces = self.scan_plain_spaces(self.indent + 1, start) or []
            if not spaces:
                break
        return yaml.ScalarToken("".join(chunks), True, start, end)

    def _ends_flow_plain(self, at: int) -> bool:
        ch = self.peek(at)
        if ch in _BLANKS or ch in _FLOW_INDICATORS:
            return True
        return ch == ":" and self.peek(at + 1) in _BLANKS + _FLOW_INDICATORS


def _mark_line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _yaml_map(loader: _YamlLoader, node: yaml.MappingNode) -> LineMap:
    own = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)
    merged = len(node.value) - own  # pairs merged in with '<<' come first; own keys override them
    result = LineMap(_mark_line(node))
    own_keys: set[str] = set()
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        line = _mark_line(key_node)
        if not isinstance(key, str):
            loader.found.append(
                (line, f"keys must be strings, got {show(key)} (quote keys like yes, no, on, off)")
            )
            continue
        if index >= merged:
            if key in own_keys:
                loader.found.append(
                    (line, f"duplicate key '{key}' (first at line {result.key_lines[key]})")
                )
                continue
            own_keys.add(key)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = line
    return result


def _yaml_seq(loader: _YamlLoader, node: yaml.SequenceNode) -> LineList:
    result = LineList(_mark_line(node))
    for child in node.value:
        result.append(loader.construct_object(child, deep=True))
        result.item_lines.append(_mark_line(child))
    return result


def _yaml_str(loader: _YamlLoader, node: yaml.ScalarNode) -> str:
    return combine_surrogates(str(loader.construct_scalar(node)), _mark_line(node), loader.found)


def _yaml_float(loader: _YamlLoader, node: yaml.ScalarNode) -> float | str:
    value = float(loader.construct_yaml_float(node))
    if math.isfinite(value):
        return value
    loader.found.append((_mark_line(node), "NaN and infinities are not JSON numbers"))
    return str(node.value)


def _yaml_int(loader: _YamlLoader, node: yaml.ScalarNode) -> int | str:
    try:
        return int(loader.construct_yaml_int(node))
    except ValueError:  # more digits than Python converts
        loader.found.append((_mark_line(node), f"number out of range ({len(node.value)} digits)"))
        return str(node.value)


def _yaml_refused(loader: _YamlLoader, node: yaml.Node) -> str | None:
    """Note an unsupported tag; a local tag on a scalar reads as the text the user meant."""
    tag = str(node.tag)
    message = f"the YAML tag '{tag}' is not supported (plait files hold JSON values)"
    local = tag.startswith("!") and not tag.startswith("!!")
    if local:
        message += f"; a value starting with '!' must be quoted: '{tag}'"
    loader.found.append((_mark_line(node), message))
    if local and isinstance(node, yaml.ScalarNode):
        return f"{tag} {node.value}".strip()
    return None


_YamlLoader.add_constructor("tag:yaml.org,2002:map", _yaml_map)
_YamlLoader.add_constructor("tag:yaml.org,2002:seq", _yaml_seq)
_YamlLoader.add_constructor("tag:yaml.org,2002:str", _yaml_str)
_YamlLoader.add_constructor("tag:yaml.org,2002:float", _yaml_float)
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _yaml_int)
_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _yaml_str)  # dates stay text
for _tag in ("binary", "set", "omap", "pairs"):
    _YamlLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _yaml_refused)
_YamlLoader.add_constructor(None, _yaml_refused)
# YAML 1.2 (and JSON) read 1e5 as a number; PyYAML's YAML 1.1 would read a string.
_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _measure(root: yaml.Node) -> None:
    """Refuse documents whose aliases expand to too many values or nest too deeply."""
    seen: dict[int, tuple[int, int]] = {}

    def visit(node: yaml.Node, depth: int) -> tuple[int, int]:
        known = seen.get(id(node))
        if known is None:
            if depth > MAX_DEPTH:
                raise Refused(
                    _mark_line(node), f"values are nested more than {MAX_DEPTH} levels deep"
                )
            children: list[yaml.Node] = []
            if isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            size, height = 1, 1
            for child in children:
                child_size, child_height = visit(child, depth + 1)
                size, height = size + child_size, max(height, child_height + 1)
                if size > MAX_VALUES:
                    raise Refused(
                        _mark_line(node), f"the document holds more than {MAX_VALUES} values"
                    )
            known = seen[id(node)] = (size, height)
        if depth + known[1] > MAX_DEPTH:
            raise Refused(_mark_line(node), f"values are nested more than {MAX_DEPTH} levels deep")
        return known

    visit(root, 0)


def parse_yaml(text: str) -> tuple[Any, Found]:
    """The document (None when unreadable) and every problem met reading it."""
    try:
        loader = _YamlLoader(text)  # refuses characters YAML does not allow (NUL, BEL, ...)
    except yaml.reader.ReaderError as exc:
        return None, [_unreadable(text, exc)]
    try:
        root = loader.get_single_node()
        if root is None:
            return None, loader.found
        _measure(root)
        return loader.construct_document(root), loader.found
    except Refused as exc:
        return None, [(exc.line, exc.message)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        why = str(exc.problem or exc.context or "unreadable")
        if exc.problem and exc.context:
            why += f" ({exc.context})"
        if "block" in why:
            why += "; check the indentation"
        return None, [(mark.line + 1 if mark else None, f"invalid YAML: {why}")]
    except yaml.reader.ReaderError as exc:
        return None, [_unreadable(text, exc)]
    except (yaml.YAMLError, RecursionError) as exc:
        return None, [
            (
                None,
                f"invalid YAML: {exc}"
                if isinstance(exc, yaml.YAMLError)
                else "invalid YAML: nested too deeply",
            )
        ]
    finally:
        loader.dispose()


def _unreadable(text: str, exc: yaml.reader.ReaderError) -> tuple[int, str]:
    """A character YAML does not allow (a control character such as NUL), with its line."""
    char = exc.character
    shown = f" U+{char:04X}" if isinstance(char, int) else ""
    return text.count("\n", 0, exc.position) + 1, f"invalid YAML: character{shown}: {exc.reason}"
