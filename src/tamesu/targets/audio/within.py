"""The words of a reply something reads during the call, transcribed within the turn's time: a turn that ran past its
`turn_timeout` while tamesu's speech-to-text caught up (seconds behind on a loaded machine) hid the lag in the
agent's turn, and a wait for the words had no end but the transcription's."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tamesu.conversation import Session
from tamesu.errors import InfraError


async def words_within(transcribe: Callable[[], Awaitable[str]], until: float, *, session: Session,
                       speech_ms: float, limit_s: float) -> str:
    """`transcribe()`'s words when they come by `until` (monotonic: the turn's start plus its `turn_timeout`,
    `limit_s`). Else the turn cannot be decided: its speech was heard (`speech_ms` of it) and what reads its words
    would read none of them, so a `transcription_cut` event says so and the run is the environment's error (exit
    3), not the agent's failure. A job that could not end in time (`until` passed) is not started."""
    left = until - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return await asyncio.wait_for(transcribe(), left)
    except TimeoutError:
        heard = f"{speech_ms / 1000:.1f}s"
        session.event("transcription_cut", heard_ms=round(speech_ms, 1),
                      note=f"{heard} of the agent's speech was heard but not transcribed within turn_timeout "
                           f"({limit_s:g}s), and its words are read during the call")
        raise InfraError(f"the agent's reply ({heard} of speech) was heard but not transcribed within turn_timeout "
                         f"({limit_s:g}s): not decided, what reads its words during the call would read none of "
                         "them (tamesu's speech-to-text was behind: a loaded machine? a longer turn_timeout gives "
                         "it time)") from None
