"""The model registry: which adapter a spec string names, and what that provider needs.

A spec is ``<prefix>:<rest>`` (``openai:gpt-4o-mini``, ``scripted:responses.json``). Each
prefix has one ``Provider`` record in ``PROVIDERS``: how to build its adapter from the
rest of the spec, the environment variables that may hold its API key, and the optional
extra that installs its SDK. ``model_from_spec`` and ``check_credentials`` only read that
table, so adding a provider is one entry here, not edits across the driver.

Provider SDKs are optional: an adapter module that imports one is imported inside its
``build``, only when its spec is asked for (a missing SDK is PLAIT-E006 with the
``pip install`` line). Every refusal here is PLAIT-E006.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plait.core.errors import PlaitError
from plait.models.base import AdapterSettings, Model
from plait.models.scripted import ScriptedModel

__all__ = [
    "PROVIDERS",
    "Provider",
    "SpecParts",
    "check_credentials",
    "fallback_specs",
    "model_from_spec",
    "run_model",
    "spec_problem",
]


@dataclass(frozen=True)
class SpecParts:
    """A spec as a provider's ``build`` receives it."""

    spec: str
    """The whole spec, as the workflow wrote it (the adapter keeps it as its name)."""
    rest: str
    """What follows ``<prefix>:``."""
    base_dir: Path
    """The folder a file named by the spec is relative to (the workflow's)."""
    settings: AdapterSettings | None
    """The adapter options read from ``llm:``; None for a provider without an SDK."""


@dataclass(frozen=True)
class Provider:
    """One spec prefix: how its adapter is built and what it needs to run."""

    prefix: str
    usage: str
    """How a spec of this provider starts, as the list of known providers shows it."""
    build: Callable[[SpecParts], Model]
    key_env: tuple[str, ...] = ()
    """Environment variables, any one of which holds the API key (none: no key needed)."""
    sdk_extra: str | None = None
    """The extra (``pip install 'plait[<extra>]'``) that installs the SDK ``build`` imports;
    None for a provider with no SDK, which also reads no adapter settings."""


def _named(parts: SpecParts) -> str:
    if not parts.rest.strip():
        raise PlaitError("E006", f"model '{parts.spec}': the model name is missing")
    return parts.rest


# scheme://host[:port][/path] then ':' and the model; the model may itself hold ':'
# (Ollama tags such as llama3.1:8b), so the URL ends at the first ':' after its authority.
# The port is taken possessively (``?+``): without that, ``http://localhost:11434/v1`` with
# no model was read as host ``localhost`` and model ``11434/v1``.
_COMPATIBLE = re.compile(
    r"^(?P<url>[A-Za-z][A-Za-z0-9+.-]*://(?:\[[^\]]*\]|[^/:\s]+)(?::\d+)?+(?:/[^:\s]*)?+)"
    r"(?::(?P<model>\S.*))?$"
)
COMPATIBLE_USAGE = (
    "expected openai-compatible:<base_url>:<model>"
    " (e.g. openai-compatible:http://localhost:11434/v1:llama3.1:8b)"
)


def spec_problem(spec: str) -> str | None:
    """What is wrong with a spec's shape, or None; never imports an SDK or reads a file.

    ``plait check`` calls it for ``llm.model`` and each ``llm.fallback`` entry, so a spec
    that could only fail when a turn is sent is refused before any run starts.
    """
    prefix, sep, rest = spec.partition(":")
    provider = PROVIDERS.get(prefix)
    if not sep or provider is None:
        known = ", ".join(p.usage for p in PROVIDERS.values())
        return f"unknown provider '{prefix}' (known: {known})"
    if prefix == "openai-compatible":
        match = _COMPATIBLE.match(rest)
        if match is None:
            return COMPATIBLE_USAGE
        if not (match["model"] or "").strip():
            return (
                f"the model name is missing after the base URL {match['url']}: {COMPATIBLE_USAGE}"
            )
        return None
    if not rest.strip():
        return (
            "the model name is missing" if prefix != "scripted" else "scripted:<file> needs a file"
        )
    return None


def _scripted(parts: SpecParts) -> Model:
    if not parts.rest:
        raise PlaitError("E006", f"model '{parts.spec}': scripted:<file> needs a file")
    return ScriptedModel.load(parts.spec, parts.base_dir / parts.rest)


def _openai(parts: SpecParts) -> Model:
    from plait.models.openai import OpenAIModel  # imports the optional openai SDK

    return OpenAIModel(_named(parts), spec=parts.spec, settings=parts.settings)


def _openai_compatible(parts: SpecParts) -> Model:
    from plait.models.openai import OpenAIModel  # imports the optional openai SDK

    problem = spec_problem(parts.spec)
    match = _COMPATIBLE.match(parts.rest)
    if problem is not None or match is None:
        raise PlaitError("E006", f"model '{parts.spec}': {problem or COMPATIBLE_USAGE}")
    return OpenAIModel(
        match["model"],
        spec=parts.spec,
        settings=parts.settings,
        base_url=match["url"],
        compatible=True,
    )


def _anthropic(parts: SpecParts) -> Model:
    from plait.models.anthropic import AnthropicModel  # imports the optional anthropic SDK

    return AnthropicModel(_named(parts), spec=parts.spec, settings=parts.settings)


PROVIDERS: Mapping[str, Provider] = {
    p.prefix: p
    for p in (
        Provider("openai", "openai:", _openai, ("OPENAI_API_KEY",), "openai"),
        Provider(
            "anthropic",
            "anthropic:",
            _anthropic,
            ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
            "anthropic",
        ),
        # A local or self-hosted server: no key is required (the adapter sends a dummy one).
        Provider(
            "openai-compatible", "openai-compatible:<base_url>:", _openai_compatible, (), "openai"
        ),
        Provider("scripted", "scripted:", _scripted),
    )
}
"""Every provider by spec prefix, in the order the known-providers message lists them."""


def model_from_spec(
    spec: str, *, base_dir: Path, settings: Mapping[str, Any] | None = None
) -> Model:
    """The adapter a spec names; unknown or malformed specs and missing SDKs are PLAIT-E006."""
    prefix, _, rest = spec.partition(":")
    provider = PROVIDERS.get(prefix)
    if provider is None:
        known = ", ".join(p.usage for p in PROVIDERS.values())
        raise PlaitError("E006", f"model '{spec}': unknown provider '{prefix}' (known: {known})")
    if provider.sdk_extra is None:
        return provider.build(SpecParts(spec, rest, base_dir, None))
    parts = SpecParts(spec, rest, base_dir, AdapterSettings.read(settings))
    try:
        return provider.build(parts)
    except ImportError as exc:
        extra = provider.sdk_extra
        raise PlaitError(
            "E006",
            f"model '{spec}' needs the {extra} SDK, which is not installed: "
            f"pip install 'plait[{extra}]' ({exc})",
        ) from exc


def fallback_specs(settings: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The specs of ``llm.fallback``, in the order they are tried (none when unset)."""
    fallback = (settings or {}).get("fallback") or ()
    return tuple(str(spec) for spec in fallback)


def run_model(spec: str, *, base_dir: Path, settings: Mapping[str, Any] | None = None) -> Model:
    """The model a run calls: ``spec``'s adapter, wrapped with ``llm.fallback``'s if any.

    Without fallbacks this is ``model_from_spec`` itself, so a run that sets none sees
    exactly the adapter (and journals exactly the answers) it always did.
    """
    primary = model_from_spec(spec, base_dir=base_dir, settings=settings)
    others = fallback_specs(settings)
    if not others:
        return primary
    from plait.models.fallback import FallbackModel

    built = (model_from_spec(other, base_dir=base_dir, settings=settings) for other in others)
    return FallbackModel((primary, *built))


def check_credentials(spec: str) -> None:
    """PLAIT-E006 when a provider that needs a key finds none in this process's environment.

    Checked before a run is driven: without it the run would start, spend its tool calls,
    and fail at its first turn (a 401 or the SDK's own refusal), leaving a failed run where
    a refused command was meant. Providers with no ``key_env`` (``openai-compatible:``
    servers, scripted models) need no key; an empty variable counts as unset.
    """
    provider = PROVIDERS.get(spec.partition(":")[0])
    names = provider.key_env if provider is not None else ()
    if names and not any(os.environ.get(name) for name in names):
        which = " or ".join(names)
        raise PlaitError(
            "E006",
            f"model '{spec}' needs an API key: set {which} in the environment of the"
            " process that drives the run",
        )
