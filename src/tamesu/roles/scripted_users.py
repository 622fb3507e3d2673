"""The JSONL design's simulator interface, played by a Python function (`simulator.use: scripts:module:function`)
or by another agent of tamesu.yaml (a `HelperAgent`), beside the model simulator of `tamesu.roles.simulator`.

Either is told the design's simulator input: `persona`, `goal`, `conversation` (`[{role, content}]`),
`last_response`, `turn_number`, `max_turns`, the simulator's settings, `test_id`, and the run's context:
`session_id`, `turn_count`, `tool_results` (of the last agent turn); a function also `options` (the case's
`simulator.options`, when written), an agent the `connector` as its model. It answers the next user message as text,
or `{"input", "goal_achieved", "reasoning"}`; a function may return None to hang up.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from tamesu.conversation import Exchange, UserTurn
from tamesu.errors import SuiteProblem, TemplateError
from tamesu.models.base import Models
from tamesu.models.structured import find_json
from tamesu.roles.simulator import UserAction, UserSimulator
from tamesu.roles.transcript import last_tool_results
from tamesu.suite.templates import Context


class HelperAgent(Protocol):
    """Another agent asked one question (`tamesu.engine.live.TargetHelper`)."""

    name: str

    async def ask(self, mode: str, request: Mapping[str, object], models: Models | None,
                  connector: str | None = None) -> tuple[object, str]: ...

    async def answer(self, mode: str, request: Mapping[str, object], models: Models | None,
                     schema: type[BaseModel], connector: str | None = None) -> BaseModel: ...


class SimulatorAnswer(BaseModel):
    input: str = ""
    goal_achieved: bool = False
    reasoning: str = ""


def runtime(exchanges: list[Exchange], context: Context) -> dict[str, Any]:
    """What the design's simulator learns about the run besides the conversation: `session_id` (the run's id:
    every case runs in a session of its own), `turn_count` (agent turns so far) and `tool_results` (the
    tools the last agent turn called, by name, with what they returned; a tool called twice keeps its last)."""
    try:
        session_id = str(context.lookup("run.id"))
    except TemplateError:
        session_id = ""
    return {"session_id": session_id, "turn_count": len(exchanges), "tool_results": last_tool_results(exchanges)}


def conversation(exchanges: list[Exchange]) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for exchange in exchanges:
        if exchange.user is not None:  # the history a stateless case sent comes first: the agent answered in it
            messages += [{"role": m.role, "content": m.content} for m in exchange.user.history]
            messages.append({"role": "user", "content": exchange.user.display()})
        messages.append({"role": "assistant", "content": exchange.agent.text})
    return messages


def _progress(exchanges: list[Exchange], max_turns: int) -> dict[str, object]:
    return {"conversation": conversation(exchanges), "last_response": exchanges[-1].agent.text if exchanges else "",
            "turn_number": len(exchanges) + 1, "max_turns": max_turns}


class _DesignSimulator(UserSimulator):
    last_reasoning: str | None = None

    def _act(self, answer: SimulatorAnswer) -> UserAction:
        self.last_reasoning = answer.reasoning or None
        if answer.goal_achieved:
            return UserAction(stop="goal_achieved")
        if not answer.input.strip():
            return UserAction(stop="simulator_stopped")
        return UserAction(turn=UserTurn(text=answer.input.strip(), source="simulator"))


class ScriptSimulator(_DesignSimulator):
    def __init__(self, function: Callable[..., Any], name: str, settings: Mapping[str, object], max_turns: int,
                 test_id: str = "", options: Mapping[str, object] | None = None) -> None:
        self._function = function
        self._options = dict(options or {})
        self._test_id = test_id
        self._name = name
        self._settings = settings
        self._max_turns = max_turns

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        inputs = {"persona": self._settings.get("persona"), "goal": self._settings.get("goal"),
                  **_progress(exchanges, self._max_turns), "metadata": dict(self._settings),
                  "test_id": self._test_id, **runtime(exchanges, context),
                  **({"options": self._options} if self._options else {})}
        try:
            result = self._function(inputs)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # the project's own code: its bug is the suite's to fix (exit 2)
            raise SuiteProblem(f"simulator {self._name} raised {type(exc).__name__}: {exc}") from exc
        if result is None:
            return UserAction(stop="simulator_stopped")
        try:
            answer = SimulatorAnswer(input=result) if isinstance(result, str) else \
                SimulatorAnswer.model_validate(result)
        except ValidationError as exc:
            raise SuiteProblem(f"simulator {self._name} returned {result!r}: expected text or "
                             f"{{input, goal_achieved, reasoning}} ({exc.errors()[0]['msg']})") from None
        return self._act(answer)


class TargetSimulator(_DesignSimulator):
    """A target of tamesu.yaml asked for each next message; a plain answer is the next message itself."""

    rerun_with = "(an agent plays the user: its answers may differ)"

    def __init__(self, helper: HelperAgent, settings: Mapping[str, object], max_turns: int, models: Models | None,
                 case_id: str, connector: str | None = None) -> None:
        self.helper = helper
        self.connector = connector
        self.settings = settings
        self.max_turns = max_turns
        self.models = models
        self.case_id = case_id

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        request = {**self.settings, "test_id": self.case_id, **_progress(exchanges, self.max_turns),
                   **runtime(exchanges, context)}
        response, text = await self.helper.ask("simulator", request, self.models, self.connector)
        return self._act(_reply(response, text))


def _reply(response: object, text: str) -> SimulatorAnswer:
    try:
        in_text = find_json(text)
    except ValueError:
        in_text = None
    for candidate in (response, in_text):
        if isinstance(candidate, dict) and ("input" in candidate or "goal_achieved" in candidate):
            return SimulatorAnswer.model_validate(candidate)
    return SimulatorAnswer(input=text)
