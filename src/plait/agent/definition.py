"""The workflow an ``Agent`` runs: its node, and the agents it may call as tools.

An agent is a workflow of one abstract node (``agent``). ``Agent(..., agents=[other])``
adds each other agent, transitively, as a *detached* abstract node named after it (its
``name``), and offers it to the model as a tool under that name: the node-level
``agents:`` mechanism of docs/architecture.md §3.10, so a call runs the other agent as a
child run (journaled, resumable, verified, its tokens and cost charged to the caller),
exactly as a workflow file's agent tools do. The run pins one model (``llm``): the other
agents run on the caller's, and one whose own model spec differs is refused; a cycle of
agents needs ``model_settings={"max_agent_depth": N}`` (PLAIT-E002 otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait.core.errors import Problem
from plait.workflow import Workflow
from plait.workflow.definition import WorkflowError

if TYPE_CHECKING:
    from plait.agent.agent import Agent

NODE = "agent"
"""The id of the agent's one node (scripted files may key responses by it)."""


def agent_workflow(agent: Agent[Any]) -> Workflow:
    """The workflow ``agent`` runs (what a run pins and verify checks)."""
    wf = Workflow.new(agent.name).model(agent.model_spec, **agent.model_settings)
    wf = _add(wf, agent, NODE)
    order = list(_called(agent))
    for other in order:
        if other.model_spec != agent.model_spec:
            raise _refused(
                f"agent '{other.name}' has model '{other.model_spec}', but it runs as a tool of"
                f" '{agent.name}' on that run's one model '{agent.model_spec}'"
            )
        wf = _add(wf, other, other.name)
    return wf.budget(**agent.budgets) if agent.budgets else wf


def _called(agent: Agent[Any]) -> dict[Agent[Any], None]:
    """Every agent ``agent`` may call, transitively, each once, in the order first met."""
    found: dict[Agent[Any], None] = {}
    names: dict[str, Agent[Any]] = {}
    stack = list(reversed(agent.agents))
    while stack:
        other = stack.pop()
        if other in found:
            continue
        if other.name == NODE or (other.name in names and names[other.name] is not other):
            raise _refused(
                f"agent tools need distinct names other than '{NODE}':"
                f" give Agent(name=...) to the agent named '{other.name}'"
            )
        names[other.name] = other
        found[other] = None
        stack.extend(reversed(other.agents))
    return found


def _add(wf: Workflow, agent: Agent[Any], node: str) -> Workflow:
    tools: list[str] = []
    for fn, options in agent.tool_functions:
        wf = wf.tool(fn, **options)
        tools.append(options.get("name") or fn.__name__)
    model = agent.output_model
    calls = [other.name for other in agent.agents]
    return wf.node(
        node,
        instruction=agent.instructions,
        tools=tools,
        response_schema=model.model_json_schema() if model is not None else None,
        flow=agent.flow,
        agents=calls or None,
    )


def _refused(message: str) -> WorkflowError:
    return WorkflowError([Problem("E004", message)])
