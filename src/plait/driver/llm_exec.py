"""Executes ``llm`` effects: builds the model request from the journaled input, calls the model.

The request is rebuilt purely from what the core journaled (transcript, offered
tool names, response schema) plus the pinned tool definitions, so a redelivered
turn sends exactly the same request. Which response a scripted model gives is
decided by the effect's ordinal among the run's LLM effects in dispatch order,
counted from the journal (so a redelivered turn gets the same response). With a delta
observer the turn is streamed (``plait.driver.deltas``); the result is the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.core.agents import agent_tool_specs
from plait.core.canonical import dumps
from plait.core.decide import MORE_TOOLS, MORE_TOOLS_DESCRIPTION
from plait.core.events import Dispatch
from plait.core.keys import JournalKey, call_id
from plait.core.outcomes import Completed, EffectOutcome, Failed, Usage
from plait.driver.deltas import DeltaObserver, turn_sink

if TYPE_CHECKING:
    from plait.models.base import Model, ModelResponse
    from plait.workflow.run_definition import RunDefinition

SUMMARIZE = (
    "Summarize the conversation you are given (one transcript entry per line) in a few"
    " sentences so that it can replace it: keep every fact, decision, tool result and open"
    " question the rest of the task needs."
)


def summarizer_messages(entries: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The folded entries as ONE user message, the request of a summarizer effect.

    A fold range starts with an assistant entry and holds tool calls with their results;
    sent as a conversation, providers refuse it (Anthropic: the first message must be the
    user's) or carry on with the task instead of summarizing it.
    """
    lines = "\n".join(dumps(entry) for entry in entries)
    return ({"role": "user", "content": f"The conversation to summarize:\n{lines}"},)


class LlmRunner:
    """Calls the run's model for each ``llm`` dispatch; owns the per-run ordinal counters."""

    def __init__(
        self,
        definition: RunDefinition,
        model: Model,
        journaled: Sequence[JournalKey],
        deltas: DeltaObserver | None = None,
    ) -> None:
        self._model = model
        self._deltas = deltas
        llm = definition.llm
        self._max_tokens = int(llm.get("max_tokens", 1024))
        self._temperature = llm.get("temperature")
        self._prices = llm.get("prices")
        self._specs = self._tool_specs(definition)
        self._ordinals: dict[JournalKey, tuple[int, int]] = {}
        self._per_node: dict[str, int] = {}
        for key in journaled:
            self._ordinal(key)

    @staticmethod
    def _tool_specs(definition: RunDefinition) -> dict[str, Any]:
        from plait.models.base import ToolSpec

        schemas = definition.tool_schemas
        specs = {
            name: ToolSpec(
                name=name,
                description=tool.description,
                input_schema=schemas.get(name, {"type": "object"}),
                strict=tool.strict,
            )
            for name, tool in sorted(definition.tools.items())
        }
        if (definition.llm or {}).get("decide"):  # a narrowed offer can be widened (§6.6)
            specs[MORE_TOOLS] = ToolSpec(
                name=MORE_TOOLS,
                description=MORE_TOOLS_DESCRIPTION,
                input_schema={"type": "object", "properties": {}},
            )
        for name, (description, schema) in agent_tool_specs(definition.pinned).items():
            specs.setdefault(
                name, ToolSpec(name=name, description=description, input_schema=schema)
            )
        return specs

    def _ordinal(self, key: JournalKey) -> tuple[int, int]:
        known = self._ordinals.get(key)
        if known is None:
            in_node = self._per_node.get(key.node, 0)
            known = (len(self._ordinals), in_node)
            self._per_node[key.node] = in_node + 1
            self._ordinals[key] = known
        return known

    def __call__(self, dispatch: Dispatch) -> Awaitable[EffectOutcome]:
        # Ordinals are taken now, in dispatch order, not when the coroutine first runs.
        ordinal = self._ordinal(dispatch.key)
        return self._complete(dispatch, ordinal)

    async def _complete(self, dispatch: Dispatch, ordinal: tuple[int, int]) -> EffectOutcome:
        from plait.models.base import ModelError, ModelRequest, answer

        value: Mapping[str, Any] = dispatch.input
        folding = "fold" in value
        entries = tuple(value.get("messages", ()))
        request = ModelRequest(
            messages=summarizer_messages(entries) if folding else entries,
            tools=()
            if folding
            else tuple(self._specs[n] for n in value.get("tools", ()) if n in self._specs),
            response_schema=None if folding else value.get("response_schema"),
            max_tokens=self._max_tokens,
            temperature=self._temperature,
            instructions=SUMMARIZE if folding else value.get("instructions"),
            call_id=call_id(dispatch.key),
            node=dispatch.key.node,
            ordinal_in_run=ordinal[0],
            ordinal_in_node=ordinal[1],
        )
        key = dispatch.key
        on_delta = turn_sink(self._deltas, key.run_id, key.node, request.call_id, ordinal[0])
        try:
            response = await answer(self._model, request, on_delta)
        except ModelError as exc:
            return Failed(exc.cause, exc.detail)
        except Exception as exc:  # an adapter bug must not take the run down
            return Failed("Unknown", f"{type(exc).__name__}: {exc}")
        # priced as the model that answered (a fallback may cost more or less)
        usd = self._usd(response.spec or self._model.spec, response)
        usage = Usage(response.input_tokens, response.output_tokens, usd)
        return Completed(response.to_json(), usage)

    def _usd(self, spec: str, response: ModelResponse) -> int:
        from plait.models.prices import turn_cost_usd_micros

        tokens = (response.input_tokens, response.output_tokens)
        cost = turn_cost_usd_micros(spec, *tokens, self._prices)
        return cost or 0
