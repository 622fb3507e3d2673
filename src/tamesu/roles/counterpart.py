"""`counterpart:`: another target of the suite plays the user, so two agents talk and tamesu brokers it.

The counterpart's `opening` is the first user turn; without one, the counterpart is sent `scenario.goal` and
its answer is. Then each agent turn goes to the counterpart, and its answer is the next user turn, until the
counterpart ends the conversation or answers nothing (`simulator_stopped`, its last `user_side` note saying
why: `reason`, and an A2A task's `state` and `message`), the agent under test stops, or `max_turns`. A
counterpart whose A2A task failed broke: a `counterpart_failed` event and the run an error quoting its message;
so is a run whose `timeout` ran out while the counterpart was answering (`queueing.asking` names it).
The counterpart runs in a session of its own (its artifacts under `counterpart/`), so its card,
transport and task events do not mix with the agent under test's; the run records one `counterpart` event
when it opens, and a `user_side` note for each turn it wrote.

Both agents may delegate to the suite's remote agents, and a remote agent cannot tell its callers apart (they
share its URL and need not say who they are). The turns alternate, so a message that reaches a remote agent
while the counterpart is composing its answer (`speaking_at`) is the counterpart's, not a delegation of the agent
under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import TYPE_CHECKING

from tamesu.conversation import AgentTurn, Exchange, Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.models.queueing import asking
from tamesu.roles.simulator import UserAction, UserSimulator
from tamesu.suite.templates import Context

if TYPE_CHECKING:
    from tamesu.targets.base import Target, TargetSpec


class CounterpartUser(UserSimulator):
    rerun_with = "(an agent plays the user: its answers may differ)"

    def __init__(self, target: Target[TargetSpec], name: str, *, opening: str | None, goal: str | None,
                 session: Session) -> None:
        # the engine builds the counterpart's target: a role never imports the targets (the browser target
        # uses roles)
        self._name = name
        self._opening = opening
        self._goal = goal
        self._run_session = session
        self._target = target
        self._opened = False
        self._asked: list[tuple[float, float]] = []
        """When the counterpart was composing an answer, on the run's clock (`inf`: it still is)."""
        self._stopped: dict[str, object] = {"reason": "had nothing to open with"}
        """Why the counterpart stopped, for the `user_side` note of the last turn."""

    async def _open(self) -> None:
        own = Session(context=self._run_session.context, artifacts_dir=self._run_session.artifacts_dir / "counterpart",
                      redactor=self._run_session.redactor, run_id=self._run_session.run_id,
                      base_dir=self._run_session.base_dir, models=self._run_session.models)
        self._opened = True  # set first: a failed open is still closed
        await self._target.open(own)
        self._run_session.event("counterpart", target=self._name, type=self._target.kind,
                                opening=self._opening is not None)

    async def _ask(self, text: str) -> str | None:
        """The counterpart's answer to `text`, or None when it ended the conversation or said nothing."""
        self._asked.append((self._run_session.now_ms(), math.inf))
        try:
            # the test's timeout running out now is the counterpart's time, as a simulator's call is: no failure
            # of the agent under test, which answered
            with asking(f"the counterpart {self._name}'s turn"):
                answer = await self._target.send(UserTurn(text=text, source="counterpart"))
        except TurnError as exc:
            raise InfraError(f"counterpart {self._name}: {exc}") from exc
        finally:
            self._asked[-1] = (self._asked[-1][0], self._run_session.now_ms())
        state = _task_state(answer) if answer.ended and self._target.kind == "a2a" else None
        if state == "failed":
            # the counterpart broke, not the agent under test: what was graded after it would test nothing
            self._run_session.event("counterpart_failed", counterpart=self._name, state=state, message=answer.text)
            raise InfraError(f"counterpart {self._name}: its task failed: {answer.text or '(no message)'}")
        if answer.handoff is not None:  # before `ended`, as an agent under test's answer with both is a handoff
            self._stopped = {"reason": "handed off", "to": answer.handoff.to}
            return None
        if answer.ended:
            self._stopped = {"reason": "ended the conversation", "state": state, "message": answer.text}
            return None
        if not answer.text.strip():
            self._stopped = {"reason": "answered nothing"}
            return None
        return answer.text

    def speaking_at(self, at_ms: float) -> str | None:
        """The counterpart's name when it was composing an answer at `at_ms` (the run's clock), else None."""
        return self._name if any(start <= at_ms <= end for start, end in self._asked) else None

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        if not self._opened:
            await self._open()
        if not exchanges:
            if self._opening is not None:
                said: str | None = context.render_text(self._opening)
            elif self._goal:
                said = await self._ask(context.render_text(self._goal))
            else:
                said = None
        else:
            said = await self._ask(exchanges[-1].agent.text)
        if said is None:
            return UserAction(stop="simulator_stopped",
                              note={"counterpart": self._name, "stopped": True, **self._stopped})
        return UserAction(turn=UserTurn(text=said, source="counterpart"),
                          note={"counterpart": self._name, "turn": len(exchanges) + 1})

    async def aclose(self) -> None:
        if self._opened:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._target.close())


def _task_state(answer: AgentTurn) -> str | None:
    """How an A2A counterpart's task ended (`failed`, `canceled`, `rejected`): an a2a target's `response` is
    its task in one shape, whatever the version and binding."""
    response = answer.response
    status = response.get("status") if isinstance(response, dict) else None
    state = status.get("state") if isinstance(status, dict) else None
    return state if isinstance(state, str) else None
