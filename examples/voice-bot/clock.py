"""The bot's own clock, so a test can check what tamesu measures against what the bot did.

- `ReplyDelay`: `?reply_delay_ms=N` on the call's URL holds each reply N ms longer before its speech is
  synthesised (between the model and the speech, on the model's first words).
- `PausedVoice`: `?reply_pause_ms=N` puts exactly N ms of silence between the sentences of a reply: each
  sentence's silent edges are cut (to its first and last sample louder than `VOICED`), so the pause is all the
  silence there is.
- `ClockedSerializer`: wraps the call's serializer, where frames meet the wire, and notes per reply, one JSON
  line each in the file `--clock-file` names, tagged with the URL's `?call=` and the connection's number in the
  bot's life (`line`: a call made twice is two lines):
  - `{"call": C, "first_audio_ms": N}`: from the caller's last voiced audio frame as it arrived (one with a
    sample louder than the line's silence: a caller's open line between utterances carries digital silence,
    which G.711 A-law decodes to +-8) to the first audio frame of the reply as a client's player plays it (on
    arrival, or once the audio before it has played);
  - `{"call": C, "reply": K, "silence_ms": N}`: the longest silence of reply K so far (written again each time
    it grows: the last line of a reply is its longest): the wait from that same caller frame to the reply's
    first voiced sample, or a pause between two voiced samples of the reply, each sample at its place in the
    frame that carried it, played as above. Samples are read as on the wire (a G.711 payload decoded).
  The greeting, said before the caller spoke, is no reply and is not noted.
"""

from __future__ import annotations

import asyncio
import audioop
import base64
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from pipecat.frames.frames import Frame, InputAudioRawFrame, LLMFullResponseStartFrame, OutputAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor, FrameProcessorSetup
from pipecat.serializers.base_serializer import FrameSerializer

VOICED = 300
"""A sample louder than this (about -41 dBFS) is voiced: the edge of a sentence the bot cuts and times (the
reference Realtime agent's threshold)."""
_LINES = itertools.count(1)
LINE_SILENCE = 8
"""A caller frame with no sample louder than this is the open line's silence (A-law's silence decodes to 8; a
caller's inaudible tail is silence too, on a G.711 line)."""


class PausedVoice:
    """Piper's voice, its sentences cut to their voiced part and `pause_ms` of silence put before each sentence
    of a reply but the first (`new_reply()` marks where a reply starts); with no pause, Piper's own."""

    def __init__(self, voice: Any, pause_ms: float) -> None:
        self.voice, self.pause_ms = voice, pause_ms
        self.first = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.voice, name)

    def new_reply(self) -> None:
        self.first = True

    def synthesize(self, text: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for chunk in self.voice.synthesize(text, *args, **kwargs):
            if not self.pause_ms:
                yield chunk
                continue
            samples = np.frombuffer(chunk.audio_int16_bytes, dtype=np.int16)
            loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > VOICED)
            if loud.size:
                samples = samples[loud[0]:loud[-1] + 1]
            if not self.first:
                samples = np.concatenate([np.zeros(round(chunk.sample_rate * self.pause_ms / 1000), np.int16),
                                          samples])
            self.first = False
            # pipecat's Piper service reads only the bytes
            yield SimpleNamespace(audio_int16_bytes=samples.tobytes(), sample_rate=chunk.sample_rate)


class ReplyDelay(FrameProcessor):
    def __init__(self, delay_s: float, voice: PausedVoice | None = None) -> None:
        super().__init__()
        self.delay_s, self.voice = delay_s, voice

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMFullResponseStartFrame):
            if self.voice is not None:  # the reply's sentences follow: its first gets no pause
                self.voice.new_reply()
            if self.delay_s > 0:
                await asyncio.sleep(self.delay_s)
        await self.push_frame(frame, direction)


def _as_sent(data: str | bytes, frame: Frame, law: str) -> tuple[np.ndarray, int]:
    """The samples a frame carries as they are on the wire, and their rate: a JSON media message's G.711 payload
    decoded, else the frame's own (pcm16 at the pipeline's rate). The serializer's resampler holds a few ms
    back: read after it, the caller's last words came out with the next (silent) message, 20-40 ms late."""
    if isinstance(data, str):
        try:
            payload = json.loads(data).get("media", {}).get("payload")
        except ValueError:
            payload = None
        if payload:
            raw = base64.b64decode(payload)
            pcm = audioop.alaw2lin(raw, 2) if law == "alaw" else audioop.ulaw2lin(raw, 2)
            return np.frombuffer(pcm, dtype=np.int16), 8000
    if isinstance(frame, (InputAudioRawFrame, OutputAudioRawFrame)):
        return np.frombuffer(frame.audio, dtype=np.int16), frame.sample_rate
    return np.zeros(0, dtype=np.int16), 16000


class ClockedSerializer(FrameSerializer):
    def __init__(self, inner: FrameSerializer, log: Path | None, call: str) -> None:
        super().__init__()
        self.inner, self.log, self.call = inner, log, call
        # Telnyx's line here is A-law (PCMA), Twilio's mu-law
        self.law = "alaw" if type(inner).__name__.startswith("Telnyx") else "mulaw"
        self.line = next(_LINES)
        self.voiced_at: float | None = None
        """When the caller's last voiced audio frame arrived, until the reply's first audio goes out."""
        self.quiet_from: float | None = None
        """The start of the reply's current silence: that caller frame's arrival, then the end of the reply's
        last voiced sample; None before the caller first speaks."""
        self.replies, self.longest = 0, 0.0
        self.player_until = 0.0
        """When the audio sent so far has finished playing at the client (monotonic s)."""
        self.replying = False

    def should_ignore_frame(self, frame: Frame) -> bool:
        return self.inner.should_ignore_frame(frame)

    async def setup(self, setup: FrameProcessorSetup) -> None:
        await self.inner.setup(setup)

    def _note(self, **note: object) -> None:
        if self.log is not None:
            with self.log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"call": self.call, "line": self.line, **note}) + "\n")

    async def serialize(self, frame: Frame) -> str | bytes | None:
        payload = await self.inner.serialize(frame)
        if not isinstance(frame, OutputAudioRawFrame) or payload is None:
            return payload
        samples, rate = _as_sent(payload, frame, self.law)
        # where a client's player plays it: on arrival, or once the audio before it has played (the transport
        # can send a few frames early after a slow one, which a player does not hear early)
        plays_at = max(time.monotonic(), self.player_until)
        self.player_until = plays_at + samples.size / rate
        if self.voiced_at is not None:
            self._note(first_audio_ms=round((plays_at - self.voiced_at) * 1000, 3))
            self.voiced_at = None
        if self.quiet_from is not None:
            loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > VOICED)
            if loud.size:
                if not self.replying:
                    self.replying, self.replies, self.longest = True, self.replies + 1, 0.0
                silence = (plays_at + loud[0] / rate - self.quiet_from) * 1000
                if silence > self.longest:
                    self.longest = silence
                    self._note(reply=self.replies, silence_ms=round(silence, 3))
                self.quiet_from = plays_at + (loud[-1] + 1) / rate
        return payload

    async def deserialize(self, data: str | bytes) -> Frame | None:
        frame = await self.inner.deserialize(data)
        # judged on the message as it came, whatever the frame: the serializer's resampler gives out audio in
        # blocks, and a message whose samples it kept back gives no audio frame (the caller's last 60-90 ms)
        if isinstance(frame, InputAudioRawFrame) or isinstance(data, str):
            samples, _rate = _as_sent(data, frame, self.law)
            if samples.size and int(np.abs(samples.astype(np.int32)).max()) > LINE_SILENCE:
                self.voiced_at = self.quiet_from = time.monotonic()
                self.replying = False
        return frame
