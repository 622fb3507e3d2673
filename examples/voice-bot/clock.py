"""The bot's own clock, so a test can check what tamesu measures against what the bot did.

- `ReplyDelay`: `?reply_delay_ms=N` on the call's URL holds each reply N ms longer before its speech is
  synthesised (between the model and the speech, on the model's first words).
- `ClockedSerializer`: wraps the call's serializer, where frames meet the wire, and notes per reply the ms from
  the caller's last voiced audio frame as it arrived (one with a sample that is not zero: a caller's open line
  between utterances carries digital silence) to the first audio frame of the reply as it went out:
  `{"call": "<?call= on the URL>", "first_audio_ms": N}`, one JSON line per reply, in the file `--clock-file`
  names. The greeting, said before the caller spoke, is no reply and is not noted.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from pipecat.frames.frames import Frame, InputAudioRawFrame, LLMFullResponseStartFrame, OutputAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor, FrameProcessorSetup
from pipecat.serializers.base_serializer import FrameSerializer


class ReplyDelay(FrameProcessor):
    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMFullResponseStartFrame) and self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        await self.push_frame(frame, direction)


class ClockedSerializer(FrameSerializer):
    def __init__(self, inner: FrameSerializer, log: Path | None, call: str) -> None:
        super().__init__()
        self.inner, self.log, self.call = inner, log, call
        self.voiced_at: float | None = None
        """When the caller's last voiced audio frame arrived, until the reply's first audio goes out."""

    def should_ignore_frame(self, frame: Frame) -> bool:
        return self.inner.should_ignore_frame(frame)

    async def setup(self, setup: FrameProcessorSetup) -> None:
        await self.inner.setup(setup)

    async def serialize(self, frame: Frame) -> str | bytes | None:
        payload = await self.inner.serialize(frame)
        if isinstance(frame, OutputAudioRawFrame) and payload is not None and self.voiced_at is not None:
            first_audio_ms = (time.monotonic() - self.voiced_at) * 1000
            self.voiced_at = None
            if self.log is not None:
                with self.log.open("a", encoding="utf-8") as out:
                    out.write(json.dumps({"call": self.call, "first_audio_ms": round(first_audio_ms, 3)}) + "\n")
        return payload

    async def deserialize(self, data: str | bytes) -> Frame | None:
        frame = await self.inner.deserialize(data)
        if isinstance(frame, InputAudioRawFrame) and any(frame.audio):
            self.voiced_at = time.monotonic()
        return frame
