"""A script's `wait_for` step: has the agent said the phrase yet, and how long to keep listening for it.

The agent's words since the user last spoke are read (an agent that greets in two utterances, or pauses
mid-menu, is heard whole). Text is matched as written (the phrase, or the phrase as a pattern); an audio turn
is also matched as speech (tamesu.speech) unless the step says `match: exact`. While the phrase is not heard
the step keeps listening, up to its `timeout` (default 15 s) from the first look: the engine hears the agent's
next utterance (`UserAction.listen`); a target that cannot hear more unprompted ends the wait at once. Every
utterance the agent said before the timeout counts, however late tamesu read it (`WaitFor.keep_listening`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from tamesu.conversation import Exchange
from tamesu.matching import one_line, quoted
from tamesu.speech.phrase import Heard, closest, find
from tamesu.suite.schema import ScriptStep

DEFAULT_TIMEOUT = 15.0
_SHOWN = 240


def since_user(exchanges: list[Exchange]) -> list[Exchange]:
    """The agent's turns since the user last spoke: the last turn that answered the user, then every
    utterance heard after it (a greeting and what followed it when the user has not spoken yet)."""
    start = 0
    for position in range(len(exchanges) - 1, -1, -1):
        if exchanges[position].user is not None:
            start = position
            break
    return exchanges[start:]


def _as_pattern(expected: str, text: str) -> bool:
    try:
        return re.search(expected, text, re.IGNORECASE) is not None
    except re.error:
        return False


def heard(expected: str, turns: list[Exchange], step: ScriptStep) -> str | None:
    """How `expected` was heard in `turns` (for the run's timeline), or None when it was not."""
    for exchange in turns:
        said = exchange.agent.text
        if expected.casefold() in said.casefold() or _as_pattern(expected, said):
            return f"turn {exchange.index} said it"
    spoken = [Heard(e.index, e.agent.text) for e in turns if e.agent.spoken and e.agent.text]
    if step.match == "exact" or not spoken:
        return None
    match = find(expected, spoken, step.similarity)
    return None if match is None else f"turn {match.where}: {match.describe()}"


def untranscribed_ms(turns: list[Exchange]) -> float:
    """The agent's speech heard in `turns` that tamesu's speech-to-text had not transcribed when the wait ended."""
    return sum(e.agent.audio.untranscribed_ms or 0.0 for e in turns if e.agent.audio is not None)


def what_was_said(expected: str, turns: list[Exchange], step: ScriptStep) -> str:
    """The agent's words for a failure's one line, with the nearest it came to the phrase in speech."""
    said = " / ".join(e.agent.text.strip() for e in turns if e.agent.text.strip())
    # speech heard and not yet transcribed when the wait ended is no silence: the words may be in it
    cut = untranscribed_ms(turns)
    untranscribed = f" ({cut / 1000:.1f}s of its speech was heard but not transcribed by then)" if cut else ""
    if not said:
        return "the agent said nothing" + untranscribed
    line = f"the agent said {quoted(one_line(said, _SHOWN))}"
    spoken = [Heard(e.index, e.agent.text) for e in turns if e.agent.spoken and e.agent.text]
    if spoken and step.match != "exact" and (near := closest(expected, spoken)) is not None:
        line += f" (closest: {quoted(near.quote)}, {near.matched} of {near.words} words)"
    return line + untranscribed


@dataclass
class Waiting:
    """One `wait_for` step being listened for."""

    step: int
    started: float
    deadline: float
    seen: int
    """How many exchanges there were when the engine was last asked to listen."""


class WaitFor:
    """The listening state of a script's `wait_for` steps."""

    def __init__(self) -> None:
        self._waiting: Waiting | None = None

    def begin(self, number: int, step: ScriptStep, at: float) -> float:
        """Step `number` waits from `at` (monotonic: the greeting it may be in began then), not from its first
        look: a greeting heard and transcribed slowly is part of the wait. Returns its timeout."""
        timeout = step.timeout if step.timeout is not None else DEFAULT_TIMEOUT
        self._waiting = Waiting(number, at, at + timeout, -1)  # its first look listens on, as a first look does
        return timeout

    def keep_listening(self, number: int, step: ScriptStep, exchanges: list[Exchange]) -> float | None:
        """Seconds more to listen for step `number`, or None when the wait is over: the last listening brought
        nothing (the agent said nothing more in its time, or the target cannot listen). Past the timeout, a
        listening that brought an utterance is followed by a late look (0 or less: how long ago the wait ended,
        `Target.listen`): what the agent said before the end counts however late tamesu read it (its
        speech-to-text, behind on a loaded machine, transcribed the utterance before past the end, while the next
        one was heard), as a listener hears it; a wait ended as that utterance was read never looked at it."""
        now = time.monotonic()
        waiting = self._waiting
        if waiting is None or waiting.step != number:
            timeout = step.timeout if step.timeout is not None else DEFAULT_TIMEOUT
            self._waiting = Waiting(number, now, now + timeout, len(exchanges))
            return timeout if timeout > 0 else None
        if len(exchanges) == waiting.seen:
            return None
        waiting.seen = len(exchanges)
        return waiting.deadline - now

    def listened(self, number: int) -> float:
        """How long step `number` has been listened for (0 when it never was)."""
        waiting = self._waiting
        return 0.0 if waiting is None or waiting.step != number else time.monotonic() - waiting.started

    def done(self) -> None:
        self._waiting = None
