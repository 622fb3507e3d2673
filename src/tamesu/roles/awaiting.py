"""Is the agent waiting for the user, or done? Decided from one agent turn, in the design's priority order,
with the reason recorded so a surprising verdict can be traced:

1. `agent_declared` / `agent_declared_done`: the response says `awaiting_input` (true or false), with an
   optional `input_hint`. An explicit false is honoured too: the agent knows better than any heuristic.
2. `input_required_state` / `task_<state>`: an A2A task state (`$.status.state`): `input-required` or
   `auth-required` waits; `completed`, `failed`, `canceled`, `rejected` are done.
3. `tool_requires_confirmation`: the agent called `ask_user`, `request_confirmation` or `get_user_input`.
4. `finish_reason_length` / `finish_reason_tool_calls`: a model's answer cut short or still calling tools
   (Anthropic's `max_tokens`, `model_context_window_exceeded` and `tool_use` the same).
5. `content_is_question`: the text ends with `?`, its last sentence starts with what/how/when/where/which/who/
   please/could you, or it asks to confirm/verify/proceed/continue.
6. `completed`: none of the above.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel

from tamesu.conversation import AgentTurn

INPUT_TOOLS = frozenset({"ask_user", "request_confirmation", "get_user_input"})
_WAITING_STATES = {"input-required", "auth-required"}
_DONE_STATES = {"completed", "failed", "canceled", "cancelled", "rejected"}
_ASKS = re.compile(r"^(what|how|when|where|which|who|please|could you)\b", re.IGNORECASE)
_CONFIRM = re.compile(r"(confirm|verify|proceed|continue)\?", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
# OpenAI's finish reasons and Anthropic's stop reasons for an answer cut short or still calling tools: the
# words of such an answer say nothing of whether the agent waits
_NOT_WAITING = frozenset({"length", "max_tokens", "model_context_window_exceeded", "tool_calls", "tool_use"})


class Awaiting(BaseModel):
    awaiting: bool
    reason: str
    hint: str | None = None
    """What the agent said it expects (`input_hint`, an A2A status message)."""


def detect(agent: AgentTurn) -> Awaiting:
    response = agent.response if isinstance(agent.response, dict) else {}
    hint = response.get("input_hint")
    hint = str(hint) if hint not in (None, "") else None
    declared = response.get("awaiting_input")
    if isinstance(declared, bool):
        return Awaiting(awaiting=declared, reason="agent_declared" if declared else "agent_declared_done", hint=hint)
    state = _task_state(response)
    if state in _WAITING_STATES:
        return Awaiting(awaiting=True, reason="input_required_state", hint=hint)
    if state in _DONE_STATES:
        return Awaiting(awaiting=False, reason=f"task_{state}")
    if any(call.name in INPUT_TOOLS for call in agent.tool_calls):
        return Awaiting(awaiting=True, reason="tool_requires_confirmation", hint=hint)
    finish = response.get("finish_reason")
    if finish in _NOT_WAITING:
        return Awaiting(awaiting=False, reason=f"finish_reason_{finish}")
    if looks_like_question(agent.text):
        return Awaiting(awaiting=True, reason="content_is_question", hint=hint)
    return Awaiting(awaiting=False, reason="completed")


def looks_like_question(text: str) -> bool:
    content = text.strip()
    if not content:
        return False
    last = _SENTENCES.split(content)[-1]
    return content.endswith("?") or bool(_ASKS.match(content) or _ASKS.match(last) or _CONFIRM.search(content))


def _task_state(response: Mapping[str, object]) -> str | None:
    status = response.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    if not isinstance(state, str):
        return None
    # A2A 1.0 writes TASK_STATE_INPUT_REQUIRED, 0.3 writes input-required
    return state.lower().removeprefix("task_state_").replace("_", "-")

