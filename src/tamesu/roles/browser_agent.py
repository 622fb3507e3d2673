"""tamesu's own browser agent: it pursues a goal on a page, one tool call per step, until it calls `done`,
gives up, or its step budget runs out.

It knows nothing of browsers: the target gives it a way to look at the page (`observe`) and to act (`act`,
which runs one of the target's actions and says what happened), so the same loop serves any page driver and
the fake provider's rules can drive it (they see the observation as `message`, with `goal`, `step`, `url`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from tamesu.matching import quoted
from tamesu.models.base import Message, MessageFile, ModelClient, ModelError, ModelRequest, ToolSpec
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.failures import infra_error

DONE, GIVE_UP = "done", "give_up"
SNAPSHOT_LIMIT = 12_000
"""Characters of the aria snapshot a model sees per step; a longer one is cut and the cut is said."""


class Observation(BaseModel):
    url: str
    title: str = ""
    aria: str = ""
    screenshot: MessageFile | None = Field(None, exclude=True)
    """The page as a picture, for models that see images (the target's `vision`); never recorded here:
    the target keeps its own screenshots."""


class AgentStep(BaseModel):
    """One action the agent chose and what came of it."""

    number: int
    action: str
    args: dict[str, Any] = Field(default_factory=dict)
    outcome: str = ""
    ok: bool = True
    url: str = ""
    """Where the page was when the agent chose the action."""
    screenshot: str | None = None


@dataclass
class GoalOutcome:
    reached: bool
    steps: list[AgentStep] = field(default_factory=list)
    summary: str = ""
    """`done`'s summary, `give_up`'s reason, or why the budget ran out."""
    prompt_version: str = ""


Act = Callable[[str, dict[str, Any], int], Awaitable[tuple[bool, str, str | None]]]
"""(action, args, step number) -> (worked, what happened, screenshot artifact or None)."""


def control_tools() -> list[ToolSpec]:
    return [
        ToolSpec(name=DONE, description="The goal is met: say what on the page shows it.",
                 parameters={"type": "object", "properties": {"summary": {"type": "string"}},
                             "required": ["summary"]}),
        ToolSpec(name=GIVE_UP, description="The goal cannot be reached: say why.",
                 parameters={"type": "object", "properties": {"reason": {"type": "string"}},
                             "required": ["reason"]}),
    ]


class BrowserAgent:
    def __init__(self, client: ModelClient, actions: list[ToolSpec], *, seed: int | None = None) -> None:
        self._client = client
        self._tools = [*actions, *control_tools()]
        self._seed = seed
        self.prompt = _prompts.load("browser_agent")

    async def pursue(self, goal: str, observe: Callable[[], Awaitable[Observation]], act: Act,
                     max_steps: int) -> GoalOutcome:
        prompt = self.prompt
        messages = [Message(role="system", content=prompt.render("system", goal=goal, max_steps=max_steps))]
        steps: list[AgentStep] = []
        observed: set[int] = set()
        """Positions of the observation messages in `messages`."""
        for number in range(1, max_steps + 1):
            seen = await observe()
            text = self._observation(seen, goal, number, max_steps)
            # only the newest page is shown in full: earlier ones shrink to their URL, so a long goal stays cheap
            for position in observed:
                messages[position] = _shrunk(messages[position])
            observed.add(len(messages))
            shown = [seen.screenshot] if seen.screenshot is not None else []
            messages.append(Message(role="user", content=text, files=shown))
            request = ModelRequest(
                purpose="browser", messages=messages, tools=self._tools, temperature=0.0, seed=self._seed,
                prompt_version=prompt.version,
                context={"message": text, "goal": goal, "step": number, "url": seen.url, "title": seen.title})
            try:
                response = await self._client.generate(request)
            except ModelError as exc:
                raise infra_error("browser agent", exc) from exc
            if not response.tool_calls:
                steps.append(AgentStep(number=number, action="(none)", ok=False, url=seen.url,
                                       outcome=f"answered without a tool call: {quoted(response.text, 200)}"))
                messages.append(Message(role="assistant", content=response.text))
                messages.append(Message(role="user", content=prompt.render("no action")))
                continue
            call = response.tool_calls[0]
            extra = len(response.tool_calls) - 1
            messages.append(Message(role="assistant", content=response.text, tool_calls=[call]))
            if call.name == DONE:
                summary = str(call.arguments.get("summary") or "")
                steps.append(AgentStep(number=number, action=DONE, args=call.arguments, url=seen.url, outcome=summary))
                return GoalOutcome(True, steps, summary, prompt.version)
            if call.name == GIVE_UP:
                reason = str(call.arguments.get("reason") or "no reason given")
                steps.append(AgentStep(number=number, action=GIVE_UP, args=call.arguments, url=seen.url,
                                       outcome=reason, ok=False))
                return GoalOutcome(False, steps, f"the browser agent gave up: {reason}", prompt.version)
            ok, outcome, shot = await act(call.name, dict(call.arguments), number)
            if extra:
                outcome += f" ({extra} more tool call{'s' if extra > 1 else ''} in the answer ignored: one per step)"
            steps.append(AgentStep(number=number, action=call.name, args=call.arguments, ok=ok, outcome=outcome,
                                   url=seen.url, screenshot=shot))
            messages.append(Message(role="tool", content=outcome, tool_call_id=call.id, name=call.name))
        return GoalOutcome(False, steps, f"the goal was not reached within its {max_steps} steps", prompt.version)

    def _observation(self, seen: Observation, goal: str, number: int, max_steps: int) -> str:
        aria = seen.aria
        if len(aria) > SNAPSHOT_LIMIT:
            aria = aria[:SNAPSHOT_LIMIT] + f"\n(cut: {SNAPSHOT_LIMIT} of {len(seen.aria)} characters shown)"
        return self.prompt.render("observation", step=number, max_steps=max_steps, url=seen.url, goal=goal,
                                  title=seen.title or "(none)", aria=aria or "(empty)")


def _shrunk(message: Message) -> Message:
    first = message.content.splitlines()[:2]
    return message.model_copy(update={"content": "\n".join([*first, "(earlier page, not shown)"]), "files": []})
