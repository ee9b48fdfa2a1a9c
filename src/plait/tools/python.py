"""Python functions as tools: import ``module:function``, read the signature, bind a context.

A tool node hands its tool the whole run context (docs/architecture.md §4): context
keys fill the parameters they name and the others are ignored; a sole parameter
annotated ``dict`` (or named ``context``) receives the whole context; a
``**kwargs`` parameter receives every key. Arguments are validated against the
signature with pydantic, so a parameter typed as a model receives the model.
Signatures are read once per function. Nothing here ever calls the tool.

A module is the file it was imported from: a workflow's ``tools.py`` is its folder's,
even when a process (a parent and its subgraph files, ``plait serve``, ``plait worker``)
has already imported another folder's ``tools.py``. That one keeps its name in
``sys.modules``; this folder's is imported again on its own, and remembered by its path.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
import threading
import typing
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pydantic

from plait.core.errors import PlaitError

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
PYTHON_SPEC = re.compile(rf"^{_NAME}(\.{_NAME})*:{_NAME}(\.{_NAME})*$")
"""``package.module:function`` (the part after the colon may be dotted: ``mod:Class.method``)."""

_MAPPING_TEXT = re.compile(r"^(typing\.|t\.)?(dict|Dict|Mapping|MutableMapping)(\[.*\])?$")


class ToolArgumentError(TypeError):
    """The context cannot fill the tool's parameters; the driver records it as ExecutorError."""


@dataclass(frozen=True)
class _Signature:
    """What binding needs to know about one function, read once."""

    name: str
    params: tuple[str, ...]
    required: frozenset[str]
    positional_only: tuple[str, ...]
    whole_context: str | None
    var_keyword: bool
    model: type[pydantic.BaseModel] | None
    as_is: dict[str, type]
    """Parameters whose validation returns a value of the type given here unchanged (a
    plain ``int``, ``str``, ``bool`` or ``float``; ``object``: any value, for ``Any`` or
    no annotation): when every argument is such a value, ``model`` need not be run."""


_AS_IS = (int, str, bool, float)
"""Annotations pydantic returns a value of exactly that type for unchanged (a subclass, a
bool for an int or an int for a float is converted, so those are validated)."""


def _as_is(params: list[inspect.Parameter]) -> dict[str, type]:
    """``_Signature.as_is`` of ``params``."""
    found: dict[str, type] = {}
    for p in params:
        annotation = p.annotation
        if annotation is inspect.Parameter.empty or annotation is Any:
            found[p.name] = object
        elif annotation in _AS_IS:
            found[p.name] = annotation
    return found


_signatures: weakref.WeakKeyDictionary[Any, _Signature] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def _first_on_path(folder: Path) -> Iterator[None]:
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


_IMPORTING = threading.RLock()
"""Imports of tool modules one at a time: ``_import_from`` may set ``sys.modules``
entries aside while it imports."""

_OWN_COPIES: dict[tuple[Path, str], ModuleType] = {}
"""Modules imported again for their folder because another folder's module of the same
name was in ``sys.modules``: by (the folder's file, module name)."""


def _import_from(folder: Path, name: str) -> ModuleType:
    """``import name`` with ``folder`` first on ``sys.path``, where a module that ``folder``
    holds is that file's module (see the module docstring)."""
    importlib.invalidate_caches()  # files written since the last import must be seen
    top = name.partition(".")[0]
    local = _file_in(folder, top)
    loaded = sys.modules.get(top)
    if local is None or loaded is None or _comes_from(loaded, local):
        with _first_on_path(folder):
            return importlib.import_module(name)
    own = _OWN_COPIES.get((local, name))
    if own is not None:
        return own
    family = [n for n in sys.modules if n == top or n.startswith(top + ".")]
    set_aside = {n: sys.modules.pop(n) for n in family}
    try:
        with _first_on_path(folder):
            own = _OWN_COPIES[(local, name)] = importlib.import_module(name)
    finally:
        for n in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
            del sys.modules[n]
        sys.modules.update(set_aside)
    return own


def _file_in(folder: Path, top: str) -> Path | None:
    """The file ``import top`` finds in ``folder`` (a module or a package), if any."""
    for candidate in (folder / f"{top}.py", folder / top / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _comes_from(module: ModuleType, path: Path) -> bool:
    file = getattr(module, "__file__", None)
    return file is not None and Path(file).resolve() == path


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def resolve_python(spec: str, base_dir: Path, *, tool: str | None = None) -> Callable[..., Any]:
    """Import ``module:function`` with ``base_dir`` first on ``sys.path`` (PLAIT-E004 if not)."""
    prefix = f"tool '{tool}': " if tool else ""

    def refuse(why: str) -> PlaitError:
        return PlaitError("E004", f"{prefix}cannot import '{spec}': {why}")

    if not isinstance(spec, str) or not PYTHON_SPEC.match(spec):
        raise refuse("expected 'module:function' (for example 'desk.tools:load_order')")
    module_name, _, attr_path = spec.partition(":")
    try:  # a module that prints while importing must not spoil a --json stdout
        with _IMPORTING, contextlib.redirect_stdout(sys.stderr):
            target: Any = _import_from(Path(base_dir).resolve(), module_name)
    except (Exception, SystemExit) as exc:  # importing runs the user's module code
        raise refuse(_why(exc)) from exc
    walked = module_name
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise refuse(f"'{walked}' has no attribute '{part}'") from None
        walked = f"{walked}.{part}" if walked != module_name else f"{module_name}:{part}"
    if not callable(target):
        raise refuse(f"it is a {type(target).__name__}, not a function")
    return typing.cast(Callable[..., Any], target)


def _is_mapping_annotation(annotation: Any) -> bool:
    if annotation is inspect.Parameter.empty:
        return False
    if isinstance(annotation, str):
        return bool(_MAPPING_TEXT.match(annotation.replace(" ", "")))
    origin = typing.get_origin(annotation) or annotation
    return origin in (dict, Mapping, MutableMapping)


def _read_signature(fn: Callable[..., Any]) -> _Signature:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    try:
        sig = inspect.signature(fn, eval_str=True)
    except Exception:  # an annotation that names something undefined: keep the text
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise ToolArgumentError(f"{name}(): cannot read its signature ({exc})") from None
    named = [
        p
        for p in sig.parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    var_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    whole = None
    if len(named) == 1 and not var_keyword:
        only = named[0]
        if only.name == "context" or _is_mapping_annotation(only.annotation):
            whole = only.name
    return _Signature(
        name=name,
        params=tuple(p.name for p in named),
        required=frozenset(p.name for p in named if p.default is inspect.Parameter.empty),
        positional_only=tuple(p.name for p in named if p.kind is inspect.Parameter.POSITIONAL_ONLY),
        whole_context=whole,
        var_keyword=var_keyword,
        model=None if whole else _arguments_model(name, named),
        as_is=_as_is(named),
    )


def _arguments_model(name: str, params: list[inspect.Parameter]) -> type[pydantic.BaseModel] | None:
    """A pydantic model of the parameters, or None when pydantic cannot express them."""
    fields: dict[str, Any] = {}
    for p in params:
        annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
        if isinstance(annotation, str):
            annotation = Any  # an annotation that could not be evaluated validates nothing
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    config = pydantic.ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model: type[pydantic.BaseModel] = pydantic.create_model(
                name, __config__=config, **fields
            )
        return model
    except Exception:
        return None


def _signature(fn: Callable[..., Any]) -> _Signature:
    global _last_signature
    last = _last_signature
    if last is not None and last[0] is fn:
        return last[1]  # the tool called last: a loop calls the same one again and again
    try:
        cached = _signatures.get(fn)
    except TypeError:  # not weak-referenceable: read it every time
        return _read_signature(fn)
    if cached is None:
        cached = _read_signature(fn)
        with contextlib.suppress(TypeError):
            _signatures[fn] = cached
    _last_signature = (fn, cached)
    return cached


_last_signature: tuple[Any, _Signature] | None = None
"""(function, its signature) of the last lookup, read and replaced whole: one strong
reference, to the function looked up last."""


def bind_arguments(fn: Callable[..., Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for calling ``fn`` on a tool node's input (the whole context).

    Raises ToolArgumentError when a required parameter has no key in the context
    or a value does not validate against the parameter's annotation. The caller
    owns ``context``: the whole-context parameter receives that very object.
    """
    last = _last_signature  # ``_signature``'s first case inline: a loop's one tool
    sig = last[1] if last is not None and last[0] is fn else _signature(fn)
    if sig.positional_only:
        raise ToolArgumentError(
            f"{sig.name}(): positional-only parameters cannot be filled from the context"
            f" ({', '.join(sig.positional_only)})"
        )
    if sig.whole_context is not None:
        return {sig.whole_context: context}
    # a Send task's input may be any JSON value
    if type(context) is not dict and not isinstance(context, Mapping):
        raise ToolArgumentError(
            f"{sig.name}() takes an object of arguments, got {type(context).__name__}"
        )
    chosen: dict[str, Any] = {}
    for p in sig.params:  # one pass: most contexts hold every parameter
        if p in context:
            chosen[p] = context[p]
        elif p in sig.required:
            _missing(sig, context)
    if sig.model is not None and chosen and not _valid_as_is(sig.as_is, chosen):
        try:
            # What ``model_validate`` calls, without its Python wrapper (which only passes
            # its unset options on as None): a tool call validates its arguments each time.
            validated = sig.model.__pydantic_validator__.validate_python(chosen)
        except pydantic.ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(part) for part in err['loc']) or 'input'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ToolArgumentError(f"{sig.name}(): invalid arguments: {details}") from None
        values = validated.__dict__  # the fields by name, without iterating the model
        chosen = {p: values[p] for p in chosen}
    if sig.var_keyword:
        chosen.update((k, v) for k, v in context.items() if k not in chosen)
    return chosen


def _valid_as_is(as_is: dict[str, type], chosen: dict[str, Any]) -> bool:
    """Every argument is a value its parameter's validation returns unchanged
    (``_Signature.as_is``): validating them would cost more than the tool call itself (a
    loop's counter) and could only give the same arguments back."""
    for p, value in chosen.items():  # a plain loop: all() over a generator costs more here
        wanted = as_is.get(p)
        if wanted is None or (wanted is not object and type(value) is not wanted):
            return False
    return True


def _missing(sig: _Signature, context: Mapping[str, Any]) -> NoReturn:
    """Raise ToolArgumentError naming the required parameters ``context`` lacks."""
    missing = [p for p in sig.params if p in sig.required and p not in context]
    keys = sorted(context)
    shown = ", ".join(keys[:20]) + (", …" if len(keys) > 20 else "")
    raise ToolArgumentError(
        f"{sig.name}() is missing required argument"
        f"{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)}"
        f" (context keys: {shown or 'none'})"
    )


def input_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of the function's arguments, read from its type hints.

    A function taking the whole context, or one pydantic cannot describe,
    accepts any object.
    """
    anything: dict[str, Any] = {"type": "object"}
    try:
        sig = _signature(fn)
    except ToolArgumentError:
        return anything
    if sig.whole_context is not None or sig.model is None:
        return anything
    try:
        schema = sig.model.model_json_schema()
    except Exception:
        return anything
    if sig.var_keyword:
        schema["additionalProperties"] = True
    return schema


def describe(fn: Callable[..., Any]) -> str:
    """The first paragraph of the function's docstring: what a model is told the tool does."""
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].strip().replace("\n", " ")
