"""The user side of a browser test: its `steps`, one per turn, in order. The target does each step and
answers with what it did; a step that fails ends the test there."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from tamesu.conversation import Exchange, UserTurn
from tamesu.roles.simulator import UserAction, UserSimulator
from tamesu.suite.templates import Context

STEP_OPTION = "browser_step"
"""The key of `UserTurn.options` that carries the step (the browser target reads it)."""


class StepsUser(UserSimulator):
    def __init__(self, steps: Sequence[Mapping[str, object]]) -> None:
        self._steps = steps
        self._next = 0

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        if self._next >= len(self._steps):
            return UserAction(stop="steps_done")
        raw = context.render_value(self._steps[self._next])
        self._next += 1
        return UserAction(turn=UserTurn(text=_line(raw), source="step", options={STEP_OPTION: raw}))


def _line(raw: Mapping[str, object]) -> str:
    """How a step reads in a transcript: `goal: Find Solaris`, `click selector=#buy`."""
    if "goal" in raw:
        return f"goal: {raw['goal']}"
    if "expect" in raw:
        return f"expect: {raw['expect']}"
    rest = " ".join(f"{key}={json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value}"
                    for key, value in raw.items() if key != "action")
    return f"{raw.get('action')} {rest}".strip()
