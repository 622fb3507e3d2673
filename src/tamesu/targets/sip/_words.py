"""The words of what one listening on a SIP call heard (its own module to keep the target's small): transcribed now
when something reads them during the call, within a `wait_for`'s time or the turn's; else once the call is over,
with the rest, not against the CPU of an agent that shares the machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tamesu.conversation import AgentTurn, Session
from tamesu.targets.audio.heard import read_after_call, words_by

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation


async def words_of(voice: AudioConversation, session: Session, turn: AgentTurn, pcm: bytes, offset_ms: float,
                   until: float | None, limit_s: float, after_call: list[AgentTurn], *,
                   talked_over: bool = False) -> str | None:
    """`pcm` (8 kHz, from `offset_ms` on the session's clock) transcribed by `until` (a `wait_for`'s), or within
    `limit_s` (turn_timeout) of now when no wait listened for it (`words_by`: None when a wait's was cut); None too
    when nothing reads `turn`'s words during the call, or the caller talks over it now: `turn` is then in
    `after_call` (`read_after_call`), its words what the caller heard of it."""
    if read_after_call(session, turn, after_call, talked_over=talked_over):
        return None
    from tamesu.audio.clip import Clip  # numpy: not at the top, so `schema`/`init` read the spec without it
    from tamesu.audio.level import pcm16

    return await words_by(voice, Clip(pcm16(pcm), 8000), offset_ms, until, limit_s)
