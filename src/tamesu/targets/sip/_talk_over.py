"""The persona talking over a sip agent's reply (`interrupt_probability`): no message on the line says so, the
caller just speaks, and the agent hears it. The reply ends where the persona starts (`listen`'s `talk_over`), the
next words are said at once, and `interruption_stop_ms` runs from the caller's first frame with a sound, as it went
out of the SIP worker, to the last frame with a sound of the reply talked over."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tamesu.audio import measured
from tamesu.conversation import AgentTurn, Session, TurnAudio

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation
    from tamesu.targets.sip.phone import SipPhone

WENT_OUT_TIMEOUT_S = 3.0


class TalkOver:
    def __init__(self) -> None:
        self.barging = False
        """The persona talked over the last reply: its next words start at once."""
        self.interrupted: AgentTurn | None = None
        """The reply talked over, until its stop is timed."""
        self._started: tuple[TurnAudio, str] | None = None
        """The reply's audio record as the barge-in marked it, and the SIP worker's mark after the first frame."""

    def due(self, voice: AudioConversation, session: Session) -> bool:
        """The persona talks over the reply now: its behaviour drew so, and it has more to say (its next words are
        known: a script's next `say`); with nothing more, the last reply is heard to its end."""
        upcoming = session.next_words
        return voice.barge_in_due() and upcoming is not None and bool(upcoming())

    async def frame(self, voice: AudioConversation, phone: SipPhone, session: Session, frame: bytes) -> None:
        """A frame of the caller's words over the reply, sent: the first with a sound starts the barge-in, where
        the agent hears the caller start (a line's first frames may be silent)."""
        from tamesu.audio.level import audible, pcm16

        start = not voice.stop_pending and audible(pcm16(frame))
        interrupted = voice.barge_in() if start else None
        await phone.frame(frame)
        if interrupted is not None:
            session.event("barge_in", at=round(session.now_ms(), 3))
            self._started = (interrupted, await phone.mark())
            if self.interrupted is not None:
                self.interrupted.audio = interrupted

    async def went_out(self, phone: SipPhone, to_ms: Callable[[float], float]) -> None:
        """Once the words are said: the barge-in starts when its first frame left the SIP worker on the call's
        media clock, not when it was handed over (frames queue there on a loaded machine)."""
        started, self._started = self._started, None
        if started is None:
            return
        record, mark = started
        went = await phone.wait_played(mark, WENT_OUT_TIMEOUT_S)
        if went is not None and record.interrupted_at_ms is not None:
            record.interrupted_at_ms = max(record.interrupted_at_ms, to_ms(went))
            record.agent_stopped_at_ms = max(record.agent_stopped_at_ms or 0.0, record.interrupted_at_ms)

    def close(self, voice: AudioConversation) -> None:
        """The talked-over reply's stop, once its audio has ended (the next reply is heard)."""
        stop = voice.close_barge_in()
        if stop is not None and self.interrupted is not None:
            self.interrupted.measures[measured.STOP] = stop
            self.interrupted = None
