"""The rest of the last reply, heard when the call ends: a persona that talks over replies ends a turn at the point
it would start talking, but after the last reply it has nothing more to say, so nobody talks over it. Hung up
there, that reply was cut at a random point (`interrupt_probability`): its text was what had come by then, and
an assertion on the agent's last words failed the agent for words it was still saying."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tamesu.conversation import AgentTurn, TurnAudio, TurnError
from tamesu.targets.audio.listen import POLL_S
from tamesu.targets.audio.wire import Incoming

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation


async def hear_out(queue: asyncio.Queue[tuple[Any, float]], read: Callable[[Any], list[Incoming]],
                   voice: AudioConversation, reply: AgentTurn, *, idle_s: float, limit_s: float,
                   words: Callable[[AgentTurn, list[Incoming]], str | None] | None = None) -> None:
    """Read the agent's messages into the last reply (`reply`, and its audio: `voice.last`) until `idle_s` of quiet
    after its speech (on the playback clock), the socket's close (left in the queue) or `limit_s`; the reply is
    complete where its last speech ended. Its text is what the agent says it said by then, from the messages
    other than audio read meanwhile (`words`: None where its protocol says nothing of it), else what was heard
    of it, transcribed when the call ends."""
    turn = voice.last
    if turn is None:
        return
    others: list[Incoming] = []
    try:
        spoke_until = await _read_on(queue, read, voice, turn, others, idle_s=idle_s, limit_s=limit_s)
    except Exception as exc:  # the call is ending: the reply stays as it was, the socket is still closed after
        voice.session.event("reply_heard_out_failed", reason=f"{type(exc).__name__}: {exc}")
        return
    said = words(reply, others) if words is not None else None
    if said is not None and said != reply.text:
        reply.text = said
    if spoke_until is not None:
        reply.completed_at_ms = spoke_until
        voice.session.event("reply_heard_out", to_ms=round(spoke_until, 1), why="the persona was to talk over the "
                            "last reply but had nothing more to say: it was heard to its end",
                            text=("what the agent said it said by its end" if said is not None else
                                  "what was heard of it, transcribed when the call ends"))


async def _read_on(queue: asyncio.Queue[tuple[Any, float]], read: Callable[[Any], list[Incoming]],
                   voice: AudioConversation, turn: TurnAudio, others: list[Incoming], *, idle_s: float,
                   limit_s: float) -> float | None:
    """Where the last reply's speech ended, reading on until `idle_s` of quiet after it (see `hear_out`); the
    messages other than audio go to `others`."""
    from tamesu.audio.clip import Clip
    from tamesu.audio.conversation import AudioFormatError
    from tamesu.audio.level import SPEECH_RMS, rms

    quiet_from = max(voice.playback.cursor_ms, voice.session.now_ms())
    spoke_until: float | None = None
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        with contextlib.suppress(TimeoutError):
            message, at = await asyncio.wait_for(queue.get(), POLL_S)
            if message is None:
                queue.put_nowait((None, at))
                break
            try:
                items = message if isinstance(message, list) else read(message)
            except TurnError:
                break  # what the agent sent is no longer read: the call is ending
            for item in items:
                if item.kind != "audio":
                    others.append(item)
                if item.kind != "audio" or not item.audio:
                    continue
                try:
                    start = voice.agent_audio(item.audio, arrived_ms=at, turn=turn)
                    clip = Clip.from_wire(item.audio, voice.receive_format)
                except (AudioFormatError, ValueError):
                    continue
                if rms(clip.samples) > SPEECH_RMS:
                    quiet_from = spoke_until = start + clip.duration_ms
        if queue.empty() and voice.session.now_ms() - quiet_from >= idle_s * 1000:
            break
    return spoke_until
