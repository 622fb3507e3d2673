"""tamesu's transcription held back, as a loaded machine's is: its speech worker kept busy (taken from its pool,
warm) until the test lets it go. Every transcription waits for it, for as long as the test says: deterministic,
where a real load (or real transcriptions queued ahead, tests/targets/test_voice_read_bound.py) is not."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable


@contextlib.asynccontextmanager
async def transcriber_held() -> AsyncIterator[Callable[[], None]]:
    """The transcription worker held until the call this yields is made, or the block ends."""
    import numpy as np

    from tamesu.audio import pool, stt
    from tamesu.audio.clip import Clip

    await stt.transcribe_off_loop(Clip(np.zeros(16000, np.int16), 16000))  # the worker up, Whisper loaded
    transcribing = pool._started("transcribe")
    worker = await asyncio.to_thread(transcribing.idle.get, True, 60)
    given: list[bool] = []

    def release() -> None:
        if not given:
            given.append(True)
            transcribing.idle.put(worker)

    try:
        yield release
    finally:
        release()
