"""plait.Agent (§10): a one-node workflow on the same journal, resume and verify."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from plait import (
    Agent,
    AgentRunState,
    PlaitError,
    RunStatus,
    Runtime,
    ToolReturnPart,
    Workflow,
)
from plait.models import ModelRequest, ModelResponse, ScriptedModel


class Answer(BaseModel):
    total: int


def lookup_order(order_id: str) -> dict:
    """Find an order by id."""
    return {"order_id": order_id, "total": 42}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def turn(text: str | None, *calls: dict[str, Any], tokens: tuple[int, int] = (10, 5)) -> dict:
    answer: dict[str, Any] = {"usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]}}
    if text is not None:
        answer["text"] = text
    if calls:
        answer["tool_calls"] = list(calls)
    return answer


LOOKUP_THEN_ANSWER = [
    turn(None, call("lookup_order", order_id="A-1"), tokens=(50, 10)),
    turn('{"total": 42}', tokens=(80, 5)),
]


def order_agent(spec: str, db: str, **options: Any) -> Agent[Answer]:
    agent = Agent(
        spec,
        instructions="Find the order total.",
        output_type=Answer,
        budgets={"max_tokens": 10_000},
        db=db,
        **options,
    )
    agent.tool(lookup_order)
    return agent


def test_run_with_tools_and_output_type_completes_and_verifies(scripted, db):
    agent = order_agent(scripted(LOOKUP_THEN_ANSWER), db)

    result = agent.run_sync("What is the total of order A-1?")

    assert result.status is RunStatus.COMPLETED
    assert result.structured_output == Answer(total=42)
    report = agent.verify(result.run_id)
    assert report.verified and report.up_to == "terminal"


def test_every_run_state_field_is_read_back_from_the_journal(scripted, db):
    agent = order_agent(scripted(LOOKUP_THEN_ANSWER), db)

    result = agent.run_sync("Total of A-1?", run_id="run-fields")

    assert result.run_id == "run-fields"
    assert result.conversation_id == "run-fields"
    system, first, asked, returned, answered = result.message_history
    assert system == {"role": "system", "content": "Find the order total."}
    assert first == {"role": "user", "content": "Total of A-1?"}
    call_id = asked["tool_calls"][0]["id"]
    assert asked == {
        "role": "assistant",
        "text": None,
        "tool_calls": [{"id": call_id, "name": "lookup_order", "arguments": {"order_id": "A-1"}}],
    }
    assert returned == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": {"order_id": "A-1", "total": 42},
        "is_error": False,
    }
    assert answered == {"role": "assistant", "text": '{"total": 42}', "tool_calls": []}
    usage = result.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (130, 15, 145)
    assert (usage.requests, usage.tool_calls) == (2, 1)
    assert result.run_step == 2
    assert result.output == '{"total": 42}'
    assert result.structured_output == Answer(total=42)
    assert isinstance(result.latest_response, ModelResponse)
    assert result.latest_response.text == '{"total": 42}'
    assert result.latest_response.input_tokens == 80
    assert result.pending_tool_calls == () and result.pending_tool_returns == ()
    assert result.pending_approval_tool_returns == () and result.deferred_tool_returns == ()
    assert result.idle_messages == ()
    assert not result.has_pending_hitl()
    assert result.metadata["run_status"] == "completed"
    assert result.metadata["outcome"] == {"kind": "completed"}
    assert result.metadata["model"] == agent.model_spec
    assert agent.state("run-fields") == result


def test_conversation_id_and_metadata_are_journaled_with_the_run(scripted, db):
    agent = order_agent(scripted(LOOKUP_THEN_ANSWER), db)
    result = agent.run_sync("Total?", conversation_id="conv-7", metadata={"user": "ana"})

    reread = Agent("scripted:elsewhere.json", db=db).state(result.run_id)

    assert reread.conversation_id == "conv-7"
    assert reread.metadata["user"] == "ana"
    assert agent.verify(result.run_id).verified


def test_hitl_tool_returns_list_approvals_before_deferred():
    approval = ToolReturnPart("refund", "call-1", ask_id="ask-1")
    deferred = ToolReturnPart("ship", "call-2", ask_id="ask-2")
    state = AgentRunState.new("run-1")
    assert state.conversation_id == "run-1" and state.status is RunStatus.STARTING
    waiting: AgentRunState[Any] = AgentRunState(
        "run-1",
        "conv-1",
        status=RunStatus.WAITING,
        pending_approval_tool_returns=(approval,),
        deferred_tool_returns=(deferred,),
    )

    assert waiting.has_pending_hitl()
    assert waiting.pending_approvals() == (approval,)
    assert waiting.pending_deferred_tools() == (deferred,)
    assert list(waiting.pending_hitl_tool_returns()) == [approval, deferred]


def test_tools_come_from_the_constructor_and_the_decorator_with_signature_schemas(scripted, db):
    def unit_price(item: str, quantity: int = 1) -> dict:
        """The price of some units of an item."""
        return {"cents": 100 * quantity}

    agent = Agent(scripted([turn("done")]), tools=[lookup_order], db=db)

    @agent.tool(timeout_s=5)
    def discount(code: str) -> dict:
        """A discount code's value."""
        return {"off": 0}

    agent.tool(unit_price)
    tools = agent.workflow().tools

    assert list(tools) == ["lookup_order", "discount", "unit_price"]
    assert tools["discount"].timeout_s == 5
    assert tools["unit_price"].description == "The price of some units of an item."
    schema = tools["unit_price"].input_schema
    assert schema is not None and schema["required"] == ["item"]
    assert set(schema["properties"]) == {"item", "quantity"}
    assert agent.workflow().nodes[0].tools == ("lookup_order", "discount", "unit_price")


def test_output_type_is_the_schema_and_a_mismatch_gets_one_corrective_turn(scripted, db):
    agent = order_agent(scripted([turn('{"total": "many"}'), turn('{"total": 42}')]), db)

    result = agent.run_sync("Total?")

    assert agent.workflow().nodes[0].response_schema == Answer.model_json_schema()
    assert result.structured_output == Answer(total=42)
    correction = result.message_history[-2]
    assert correction["role"] == "user" and "response schema" in correction["content"]
    assert agent.verify(result.run_id).verified


def test_a_second_schema_mismatch_fails_the_run(scripted, db):
    agent = order_agent(scripted([turn('{"total": "x"}'), turn("no idea")]), db)

    result = agent.run_sync("Total?")

    assert result.status is RunStatus.FAILED
    assert result.output is None and result.structured_output is None
    assert "SchemaValidationFailed" in result.metadata["outcome"]["detail"]
    assert agent.verify(result.run_id).verified


def test_without_output_type_the_output_is_the_final_text(scripted, db):
    agent = Agent(scripted([turn("The total is 42.")]), instructions="Answer.", db=db)

    result = agent.run_sync("Total?")

    assert result.output == "The total is 42."
    assert result.structured_output is None
    assert agent.verify(result.run_id).verified


def test_after_response_hook_replacement_is_journaled_and_verifies(scripted, db):
    def correct_the_total(request: ModelRequest, response: ModelResponse) -> ModelResponse | None:
        if response.tool_calls:
            return None  # keep tool-calling answers
        return ModelResponse(
            text='{"total": 42}', input_tokens=response.input_tokens, output_tokens=1
        )

    spec = scripted([LOOKUP_THEN_ANSWER[0], turn('{"total": 41}')])
    agent = order_agent(spec, db, after_response=correct_the_total)

    result = agent.run_sync("Total?")

    assert result.structured_output == Answer(total=42)
    journaled = [e for e in agent.trace(result.run_id) if e["kind"] == "llm"]
    assert journaled[-1]["result"]["text"] == '{"total": 42}'
    assert journaled[-1]["result"]["usage"]["output_tokens"] == 1
    assert result.latest_response is not None and result.latest_response.output_tokens == 1
    assert agent.verify(result.run_id).verified
    # verify answers from the journal: a definition without the hook replays it exactly
    assert order_agent(spec, db).verify(result.run_id).verified


def test_async_hooks_are_awaited(scripted, db):
    seen: list[int] = []

    async def before(request: ModelRequest) -> None:
        await asyncio.sleep(0)
        seen.append(request.ordinal_in_run)

    async def after(request: ModelRequest, response: ModelResponse) -> ModelResponse | None:
        await asyncio.sleep(0)
        return None

    agent = order_agent(
        scripted(LOOKUP_THEN_ANSWER), db, before_request=before, after_response=after
    )

    result = asyncio.run(agent.run("Total?"))

    assert seen == [0, 1]
    assert result.structured_output == Answer(total=42)


def test_before_request_sees_the_request_but_cannot_change_the_run(scripted, db):
    seen: list[int] = []

    def meddle(request: ModelRequest) -> None:
        seen.append(len(request.messages))
        request.messages[0]["content"] = "tampered"  # type: ignore[index]

    spec = scripted(LOOKUP_THEN_ANSWER)
    agent = order_agent(spec, db, before_request=meddle)

    result = agent.run_sync("Total?")

    assert seen == [2, 4]
    assert result.message_history[0]["content"] != "tampered"
    llm_inputs = [e["input"] for e in agent.trace(result.run_id) if e["kind"] == "llm"]
    assert all(i["messages"][0]["content"] != "tampered" for i in llm_inputs)
    assert agent.verify(result.run_id).verified


def test_a_model_object_is_the_model_called_and_its_spec_is_pinned(scripted, db):
    spec = scripted([turn("The total is 42.")])

    class Recording:
        """A Model object: records its requests, answers through a scripted model."""

        def __init__(self) -> None:
            self.spec = spec  # the driver checks the spec before the run is written
            self.requests: list[ModelRequest] = []
            self._answers = ScriptedModel.load(spec, Path(spec.partition(":")[2]))

        async def complete(self, request: ModelRequest) -> ModelResponse:
            self.requests.append(request)
            return await self._answers.complete(request)

    model = Recording()
    agent = Agent(model, instructions="Answer.", db=db)

    result = agent.run_sync("hi")

    assert [r.messages[1] for r in model.requests] == [{"role": "user", "content": "hi"}]
    assert result.output == "The total is 42."
    assert result.metadata["model"] == spec
    assert Agent(spec, instructions="Answer.", db=db).verify(result.run_id).verified


def test_idle_messages_lists_steering_messages_not_yet_fed_to_the_run(scripted, db):
    spec = scripted([turn(None, call("lookup_order", order_id="A-1"), tokens=(150, 10))])
    agent = order_agent(spec, db, model_settings={"max_tokens": 100})
    agent.budgets = {"max_tokens": 200}  # the second turn's reservation does not fit
    stopped = agent.run_sync("Total?")
    assert stopped.status is RunStatus.FAILED
    assert stopped.metadata["run_status"] == "budget_exhausted"
    assert stopped.metadata["outcome"] == {"kind": "budget_exhausted", "axis": "tokens"}
    assert stopped.idle_messages == ()
    (waiting,) = stopped.pending_tool_returns  # returned, not yet sent to the model
    assert waiting.tool_name == "lookup_order"
    assert waiting.content == {"order_id": "A-1", "total": 42}
    assert stopped.message_history[-1]["tool_calls"][0]["id"] == waiting.tool_call_id

    with Runtime(db) as runtime:
        runtime.send(stopped.run_id, "Apply the 2-cent discount.")

    assert agent.state(stopped.run_id).idle_messages == ("Apply the 2-cent discount.",)


def test_resuming_a_finished_run_reads_it_back_without_calling_the_model(scripted, db):
    spec = scripted(LOOKUP_THEN_ANSWER)
    result = order_agent(spec, db).run_sync("Total?")
    calls: list[int] = []
    again = order_agent(spec, db, before_request=lambda r: calls.append(1))

    assert again.resume_sync(result.run_id) == result
    assert calls == []


def test_a_changed_agent_cannot_resume_or_verify_the_run(scripted, db):
    spec = scripted(LOOKUP_THEN_ANSWER)
    result = order_agent(spec, db).run_sync("Total?")
    changed = order_agent(spec, db)
    changed.instructions = "Something else."

    with pytest.raises(PlaitError) as raised:
        changed.verify(result.run_id)

    assert raised.value.code == "E010"


def test_workflows_run_by_the_runtime_are_untouched_by_agents_in_the_same_process(scripted, db):
    spec = scripted(LOOKUP_THEN_ANSWER)
    order_agent(spec, db).run_sync("Total?")
    workflow = (
        Workflow.new("plain").model(spec).node("ask", instruction="Total?", tools=[lookup_order])
    )

    with Runtime(db) as runtime:
        result = runtime.run_sync(workflow, {"order": "A-1"})
        report = runtime.verify(result.run_id, workflow=workflow)

    assert result.status == "completed" and result.context["total"] == 42
    assert report.verified


class PositiveTotal(BaseModel):
    total: int

    @field_validator("total")
    @classmethod
    def positive(cls, value: int) -> int:
        if value < 0:
            raise ValueError("a total is never negative")
        return value


def test_output_type_validators_re_prompt_then_fail_the_node(scripted, db):
    """The JSON schema admits {"total": -5}; the output type's validator does not: the
    turn fails SchemaValidationFailed, the loop re-prompts once, then the node fails."""
    fixed = Agent(scripted([turn('{"total": -5}'), turn('{"total": 5}')]), db=db,
                  instructions="Total?", output_type=PositiveTotal)  # fmt: skip
    stubborn = Agent(scripted([turn('{"total": -5}'), turn('{"total": -6}')]), db=db,
                     instructions="Total?", output_type=PositiveTotal)  # fmt: skip

    good = fixed.run_sync("What is the total?")
    bad = stubborn.run_sync("What is the total?")

    assert good.status is RunStatus.COMPLETED
    assert good.structured_output == PositiveTotal(total=5)
    turns = [e for e in fixed.trace(good.run_id) if e["kind"] == "llm"]
    assert [t["status"] for t in turns] == ["failed", "completed"]
    assert turns[0]["failure"]["cause"] == "SchemaValidationFailed"
    assert "a total is never negative" in turns[0]["failure"]["detail"]
    assert fixed.verify(good.run_id).verified
    assert bad.status is RunStatus.FAILED
    assert bad.structured_output is None
    assert stubborn.state(bad.run_id).status is RunStatus.FAILED  # readable again


def test_a_provider_without_its_api_key_is_refused_before_a_run_is_written(db, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent("openai:gpt-4o-mini", instructions="Answer.", db=db)

    with pytest.raises(PlaitError) as refused:
        agent.run_sync("Total?", run_id="r1")

    assert refused.value.code == "E006" and "OPENAI_API_KEY" in str(refused.value)
    with Runtime(db) as runtime:
        assert runtime.store.list_runs() == []
