"""One chunk of the agent's audio on an audio socket, taken into the listening that heard it (its own module to
keep the socket's small)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from tamesu.conversation import AgentTurn, TurnError
from tamesu.targets.audio.heard import Heard

if TYPE_CHECKING:
    from tamesu.audio.conversation import AudioConversation


def take_chunk(voice: AudioConversation, data: bytes, at: float, heard: Heard, turn: AgentTurn,
               audio_turn: Any) -> None:
    """Place `data` (arrived at `at`, ms) on the playback clock and record it; count it in the reply (`turn`, its
    audio `audio_turn`) unless it is an earlier reply's, set aside. Audio not in the agreed format fails the turn."""
    from tamesu.audio.clip import Clip
    from tamesu.audio.conversation import AudioFormatError
    from tamesu.audio.level import SPEECH_RMS, rms

    if earlier := voice.earlier_reply(audio_turn, data, at):
        # no reply to the caller: counted, its quiet since then ended the turn as soon as the caller
        # stopped, and the answer after it was never heard
        with contextlib.suppress(Exception):
            start = voice.agent_audio(data, arrived_ms=at, turn=None)
            heard.set_aside(earlier, start, at, data, voice.receive_format)
        return
    try:
        start = voice.agent_audio(data, arrived_ms=at, turn=audio_turn)
        clip = Clip.from_wire(data, voice.receive_format)
    except (AudioFormatError, ValueError) as exc:
        raise TurnError(f"the agent's audio does not fit the agreed format: {exc}", raw=heard.controls) from None
    heard.audio_ms += clip.duration_ms
    heard.arrivals.append((at, clip.duration_ms))
    if rms(clip.samples) > SPEECH_RMS:
        if heard.spoke_at is None:
            heard.spoke_at = start
            turn.first_token_at_ms = heard.reply_starts(start, audio_turn)
        heard.quiet_from = start + clip.duration_ms
    if heard.spoke_at is not None:
        heard.pcm.append(clip.samples if clip.rate == 16000 else clip.at(16000).samples)
