"""The user side of a conversation: what to say next, or that the conversation is over."""

from __future__ import annotations

import mimetypes
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from tamesu.conversation import Exchange, FileRef, UserTurn
from tamesu.suite.schema import FileSpec, ScriptStep
from tamesu.suite.templates import Context


@dataclass
class UserAction:
    """The next user turn, or the reason the user stops."""

    turn: UserTurn | None = None
    stop: str | None = None
    """Why the conversation ends here: `script_done`, `simulator_stopped`, `stop_when`..."""
    failure: str | None = None
    """Set when stopping means the agent did not do what the script waited for."""


class UserSimulator(ABC):
    """Anything that plays the user: a script, a model with a persona, another agent."""

    @abstractmethod
    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction: ...


def file_ref(spec: FileSpec, base_dir: Path) -> FileRef:
    source = spec.path or spec.uri or ""
    name = spec.name or Path(source.split("?", 1)[0]).name or "file"
    mime = spec.mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
    path = str((base_dir / spec.path).resolve()) if spec.path else None
    return FileRef(name=name, mime=mime, path=path, uri=spec.uri)


def _heard(expected: str, said: str) -> bool:
    return expected.casefold() in said.casefold() or re.search(expected, said, re.IGNORECASE) is not None


class ScriptedUser(UserSimulator):
    """Says the `scenario.script` steps in order, then stops.

    A `wait_for` step holds the script until the agent's last turn says that text (or matches it as a
    pattern); when the agent did not, the conversation ends as a failure naming the step.
    """

    def __init__(self, steps: list[ScriptStep], base_dir: Path) -> None:
        self._steps = steps
        self._base_dir = base_dir
        self._next = 0

    @property
    def exhausted(self) -> bool:
        return self._next >= len(self._steps)

    async def next_turn(self, exchanges: list[Exchange], context: Context) -> UserAction:
        while self._next < len(self._steps):
            number = self._next + 1
            step = self._steps[self._next]
            self._next += 1
            if step.wait_for is not None:
                expected = context.render_text(step.wait_for)
                said = exchanges[-1].agent.text if exchanges else ""
                if not _heard(expected, said):
                    return UserAction(stop="script_done", failure=(
                        f"script step {number} waited for {expected!r}, the agent said {said[:120]!r}"))
            turn = self._turn(step, context)
            if turn is not None:
                return UserAction(turn=turn)
        return UserAction(stop="script_done")

    def _turn(self, step: ScriptStep, context: Context) -> UserTurn | None:
        text = context.render_text(step.say) if step.say is not None else ""
        if step.dtmf and not text:
            text = step.dtmf  # a text channel has no keypad: the digits travel as words
        data = context.render_value(step.data) if step.data is not None else None
        files = [file_ref(f, self._base_dir) for f in step.files]
        if not text and data is None and not files:
            return None
        return UserTurn(text=text, data=data, files=files, source="script")
