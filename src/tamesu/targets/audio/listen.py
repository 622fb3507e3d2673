"""The listening loop of a call whose audio arrives as timed chunks (the `sip` worker's, a LiveKit track's):
the agent's reply is its speech until `idle` of silence after it, the end of the call, or `turn_timeout`.

A target is the protocol around it: it hands the loop what arrived since the last look (`Line.fresh_audio`),
says when the call is over (`Line.call_over`), and drains its own events (`Line.poll`); the loop records every
chunk through the voice toolkit and keeps the reply's speech for the transcript.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tamesu.conversation import AgentTurn, TimeGiven, TurnAudio, TurnError

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation

POLL_S = 0.02
"""How often every audio target looks at what arrived: finer than a syllable, so the end of a reply
(`idle`) and a barge-in are placed within 20 ms, and cheap enough for a 2-core machine."""


class Line(Protocol):
    """What the loop needs of a call."""

    def fresh_audio(self) -> list[tuple[float, bytes]]:
        """The agent's audio since the last call, as (monotonic arrival, PCM)."""
        ...

    def to_ms(self, monotonic_s: float) -> float:
        """A monotonic time on the session's clock (ms since it started)."""
        ...

    def poll(self) -> float | None:
        """Record what else came (digits), once per look; the monotonic time of the latest digit the agent sent
        since the last look, if any: the agent still signalling, so its reply has not ended."""
        ...

    def call_over(self) -> bool:
        """Whether the call has ended (the agent hung up or left); the reply ends with it."""
        ...

    def put_back(self, count: int) -> None:
        """The last `count` chunks `fresh_audio` gave are given again by its next call: they came after the reply
        heard had ended, and are the next listening's."""
        ...


def ended_late(turn_timeout: float, idle: float) -> str:
    """Why a reply that was still going on at `turn_timeout` fails its turn: a caller would have given up (a
    text target's answer that late fails too; cutting it and passing hid an agent that never stops talking)."""
    return (f"the agent's reply did not end within turn_timeout ({turn_timeout:g}s): it was still talking then, "
            f"never {idle:g}s silent (idle)")


@dataclass
class Speech:
    """What one listening kept: the reply from its first sound on."""

    pieces: list[bytes] = field(default_factory=list)
    spoke_at: float | None = None
    """Monotonic time of the agent's first sound."""
    talked_over: bool = False
    """The persona started talking over the reply (`talk_over`): it ends there."""
    heard_out: float | None = None
    """Monotonic time the reply was known to be over, when it fell quiet: its last sound and `idle` after it (a
    listener behind the line knew it later)."""

    @property
    def pcm(self) -> bytes:
        return b"".join(self.pieces)


async def listen(line: Line, voice: AudioConversation, turn: AgentTurn, *, idle: float, turn_timeout: float,
                 now_ms: Callable[[], float], give_up: Callable[[], Awaitable[bool]] | None = None,
                 limit: float | None = None, paced: bool = False,
                 talk_over: Callable[[], bool] | None = None) -> Speech:
    """The agent's reply into `turn` (first sound, `ended`); raises TurnError when it said nothing within
    `turn_timeout`. `give_up`, asked once per look, ends the reply early when it says so (the call's
    `max_duration`). With `limit`, a reply that has not started within that many seconds is no reply: the
    Speech comes back with `spoke_at` None (a `wait_for` listening on for more of the agent's words, whose
    own timeout is the limit, however it compares with `turn_timeout`, which then runs from the first sound). A
    `limit` of 0 or less is a late look (`heard.late_look`): the wait ended that long ago, and only a reply whose
    first sound came by then is heard. `paced`: the line plays its audio out at its own pace, and each chunk is heard
    as it arrives (a SIP call's). `talk_over`, asked once per look after the reply started: the persona talks over
    it now, and the reply ends there (`talked_over`); after such a barge-in, audio that is the talked-over reply
    going on is no part of the next reply (`AudioConversation.earlier_reply`), and is placed a frame at a time, so
    its stop is timed to 20 ms, not to a chunk's 100."""
    # numpy: this module's POLL_S is read by text-mode targets too
    from tamesu.audio.level import first_sound, is_speech

    heard = Speech()
    audio_turn: TurnAudio | None = voice.current
    started = time.monotonic()
    # a listen's turn_timeout runs from the agent's first sound: before it, `limit` alone says how long to wait
    timed_from = started
    late_by = started + limit if limit is not None and limit <= 0 else None
    quiet_since: float | None = None
    while True:
        signalled = line.poll()
        fresh = line.fresh_audio()
        for n, (chunk_at, chunk) in enumerate(fresh):
            if quiet_since is not None and signalled is None and chunk_at - quiet_since >= idle:
                # the reply had ended before this chunk came (`idle` of quiet): a listener behind the line (a late
                # look, read after the utterance before was transcribed) leaves what followed to the next listening
                line.put_back(len(fresh) - n)
                turn.completed_at_ms = line.to_ms(quiet_since)
                heard.heard_out = quiet_since + idle
                return heard
            for at, pcm in _framed(voice, [(chunk_at, chunk)]):
                if talk_over is not None and _before_the_reply(voice, audio_turn, pcm, line.to_ms(at)):
                    voice.agent_audio(pcm, arrived_ms=line.to_ms(at), paced=paced)  # the talked-over reply's tail
                    continue
                loud = is_speech(pcm)
                if loud and heard.spoke_at is None and (cut := first_sound(pcm)):
                    # the line's silence is recorded, but the reply starts with the agent's first sound: in the
                    # chunk that carries it, after up to 100 ms of the line's silence, each sample at its place
                    voice.agent_audio(pcm[:cut * 2], arrived_ms=line.to_ms(at), paced=paced)
                    at, pcm = at + cut / voice.receive_format.rate, pcm[cut * 2:]
                voice.agent_audio(pcm, arrived_ms=line.to_ms(at), paced=paced,
                                  turn=audio_turn if heard.spoke_at is not None or loud else None)
                if loud:
                    if heard.spoke_at is None and late_by is not None and at > late_by:
                        # a late look: its first sound came after the wait's end, heard by no listener by then
                        line.put_back(len(fresh) - n - 1)
                        return Speech()
                    if heard.spoke_at is None:
                        heard.spoke_at = at
                        turn.first_token_at_ms = line.to_ms(at)
                        if limit is not None:
                            timed_from = time.monotonic()
                    quiet_since = None
                    heard.pieces.append(pcm)
                elif heard.spoke_at is not None:
                    heard.pieces.append(pcm)
                    quiet_since = quiet_since or at
        if signalled is not None and heard.spoke_at is not None and quiet_since is not None:
            # digits after the words (an IVR's "1234#" said after "here are your digits") are the reply going on:
            # its end is idle after the last of them, not after the words (the last digits were cut off)
            quiet_since = max(quiet_since, signalled)
        now = time.monotonic()
        if line.call_over():
            turn.ended = True
            break
        if heard.spoke_at is not None and quiet_since is not None and now - quiet_since >= idle:
            # the reply was complete when it fell quiet: the idle wait that tells so is not the agent's time
            turn.completed_at_ms = line.to_ms(quiet_since)
            heard.heard_out = quiet_since + idle
            return heard
        if talk_over is not None and heard.spoke_at is not None and talk_over():
            heard.talked_over = True
            turn.completed_at_ms = now_ms()
            return heard
        if limit is not None and heard.spoke_at is None:
            if now - started > limit:
                return heard
        elif now - timed_from > turn_timeout:
            turn.completed_at_ms = now_ms()
            given: TimeGiven = {"limit_s": turn_timeout, "started_at_ms": line.to_ms(timed_from)}
            if heard.spoke_at is None:
                raise TurnError(f"the agent said nothing within {turn_timeout:g}s", **given)
            if quiet_since is None or now - quiet_since < idle / 2:
                # still talking at the deadline (a pause between words is no end); fallen quiet, the reply is
                # what came
                raise TurnError(ended_late(turn_timeout, idle), **given)
            break
        if give_up is not None and await give_up():
            break
        await asyncio.sleep(POLL_S)
    turn.completed_at_ms = now_ms()
    return heard


def _framed(voice: AudioConversation, chunks: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """`chunks` a 20 ms frame each, each dated at its place, while a talked-over reply's stop is timed (a stop is
    the arrival of its last chunk with sound: a 100 ms chunk put it up to 80 ms early); else as they came."""
    if not voice.stop_pending:
        return chunks
    rate = voice.receive_format.rate
    size = rate // 50 * 2  # 20 ms of pcm16
    return [(at + start / 2 / rate, pcm[start:start + size])
            for at, pcm in chunks for start in range(0, len(pcm), size)]


def _before_the_reply(voice: AudioConversation, turn: TurnAudio | None, pcm: bytes, at_ms: float) -> bool:
    """Whether audio arriving at `at_ms` is the talked-over reply going on, not the reply to the caller's words."""
    last = voice.last
    return last is not None and last.interrupted_at_ms is not None and \
        voice.earlier_reply(turn, pcm, at_ms) is not None
