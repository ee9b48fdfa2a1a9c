"""A turn the provider fails with SchemaValidationFailed gets ONE corrective message (§6.2)."""

from __future__ import annotations

from plait import Runtime, Workflow
from plait.models.base import ModelError, ModelRequest, ModelResponse

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


class ShapeRefusingModel:
    """A provider that fails the first ``refusals`` turns with SchemaValidationFailed."""

    spec = "test:shape-refusing"

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) <= self.refusals:
            raise ModelError("SchemaValidationFailed", "output did not match the schema")
        return ModelResponse(text='{"answer": "ok"}')


def workflow() -> Workflow:
    return (
        Workflow.new("shape")
        .node("agent", instruction="Answer.", response_schema=SCHEMA)
        .model("test:shape-refusing")
    )


def test_one_schema_failure_is_corrected_and_the_node_completes(tmp_path):
    model = ShapeRefusingModel(refusals=1)
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}", model=model) as rt:
        result = rt.run_sync(workflow(), run_id="shape")
        report = rt.verify("shape", workflow=workflow())

    assert result.status == "completed", result.to_json()
    assert result.context == {"answer": "ok"}
    corrective = model.requests[1].messages[-1]
    assert corrective["role"] == "user"
    assert corrective["content"].startswith("Your answer does not match the required response")
    assert "output did not match the schema" in corrective["content"]
    assert report.verified, report.to_json()


def test_a_second_schema_failure_fails_the_node(tmp_path):
    model = ShapeRefusingModel(refusals=2)
    with Runtime(f"sqlite:///{tmp_path / 'p.db'}", model=model) as rt:
        result = rt.run_sync(workflow(), run_id="shape")

    assert result.status == "failed"
    assert result.outcome["Failed"]["node"] == "agent"
    assert "SchemaValidationFailed" in result.outcome["Failed"]["detail"]
    assert len(model.requests) == 2
