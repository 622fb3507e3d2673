"""A Python function playing the user (`simulator.use: scripts:module:function`), beside the model simulator
of `tamesu.roles.simulator`.

The function gets one mapping, the simulator input of the design: `persona`, `goal`, `conversation`
(`[{role, content}]`), `last_response`, `turn_number`, `max_turns`, `metadata` (every simulator setting),
`test_id`, and the run's context: `session_id`, `turn_count`, `tool_results` (of the last agent turn). It
returns the next user message as text, or `{"input", "goal_achieved", "reasoning"}`, or None to hang up.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from tamesu.conversation import Exchange, UserTurn
from tamesu.errors import InfraError, TemplateError
from tamesu.roles.simulator import UserAction, UserSimulator
from tamesu.roles.transcript import last_tool_results
from tamesu.suite.templates import Context


class ScriptAnswer(BaseModel):
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
        if exchange.user is not None:
            messages.append({"role": "user", "content": exchange.user.display()})
        messages.append({"role": "assistant", "content": exchange.agent.text})
    return messages


class ScriptSimulator(UserSimulator):
    def __init__(self, function: Callable[..., Any], name: str, settings: dict[str, Any], max_turns: int,
                 test_id: str = "") -> None:
        self._function = function
        self._test_id = test_id
        self._name = name
        self._settings = settings
        self._max_turns = max_turns
        self.last_reasoning: str | None = None

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        inputs = {
            "persona": self._settings.get("persona"), "goal": self._settings.get("goal"),
            "conversation": conversation(exchanges),
            "last_response": exchanges[-1].agent.text if exchanges else "",
            "turn_number": len(exchanges) + 1, "max_turns": self._max_turns, "metadata": dict(self._settings),
            "test_id": self._test_id, **runtime(exchanges, context),
        }
        try:
            result = self._function(inputs)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            raise InfraError(f"simulator {self._name} raised {type(exc).__name__}: {exc}") from exc
        if result is None:
            return UserAction(stop="simulator_stopped")
        try:
            answer = ScriptAnswer(input=result) if isinstance(result, str) else ScriptAnswer.model_validate(result)
        except ValidationError as exc:
            raise InfraError(f"simulator {self._name} returned {result!r}: expected text or "
                             f"{{input, goal_achieved, reasoning}} ({exc.errors()[0]['msg']})") from None
        self.last_reasoning = answer.reasoning or None
        if answer.goal_achieved:
            return UserAction(stop="goal_achieved")
        if not answer.input.strip():
            return UserAction(stop="simulator_stopped")
        return UserAction(turn=UserTurn(text=answer.input.strip(), source="simulator"))
