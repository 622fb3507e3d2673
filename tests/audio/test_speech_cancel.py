"""A synthesis no longer wanted ends with its process: a line synthesised ahead (a persona that may talk over the
next reply) and then not said, or a run cut short, is cancelled, and espeak-ng went on synthesising it, a process
tamesu no longer waited for."""

from __future__ import annotations

import asyncio
import os
import shutil
import time

import pytest

from agents.voice import needs_voice

pytestmark = [needs_voice, pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="no espeak-ng")]


def _espeaks() -> set[int]:
    """This process's espeak-ng children."""
    found: set[int] = set()
    for thread in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{thread}/children") as children:
                listed = children.read().split()
        except FileNotFoundError:  # a thread (the executor's, a speech worker's) ended since the listing
            continue
        for child in listed:
            try:
                with open(f"/proc/{child}/comm") as comm:
                    if comm.read().strip().startswith("espeak"):
                        found.add(int(child))
            except FileNotFoundError:
                continue
    return found


async def test_a_cancelled_espeak_synthesis_ends_its_process() -> None:
    from tamesu.audio import tts

    long_text = "A line nobody will say, synthesised ahead and then not wanted. " * 200
    making = asyncio.ensure_future(tts.say(long_text, "espeak:en-us"))
    deadline = time.monotonic() + 10
    while not _espeaks() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    started = _espeaks()
    assert started, "espeak-ng did not start"
    making.cancel()
    with pytest.raises(asyncio.CancelledError):
        await making
    deadline = time.monotonic() + 2
    while _espeaks() & started and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _espeaks() & started, "espeak-ng went on synthesising words nobody waited for"


async def test_a_shared_synthesis_ends_its_process_only_when_its_last_caller_stops_waiting() -> None:
    """Callers asking for the same words at once share one synthesis (tts.kept): one that stops waiting leaves it to
    the other, and the last one to stop ends the process."""
    from tamesu.audio import tts

    long_text = "A line two callers asked for, and then neither wanted. " * 200
    first = asyncio.ensure_future(tts.say(long_text, "espeak:en-us"))
    second = asyncio.ensure_future(tts.say(long_text, "espeak:en-us"))
    deadline = time.monotonic() + 10
    while not _espeaks() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    started = _espeaks()
    assert len(started) == 1, started  # one synthesis for both
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.sleep(0.3)
    assert _espeaks() & started, "the synthesis the second caller waits for was ended with the first caller"
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    deadline = time.monotonic() + 2
    while _espeaks() & started and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _espeaks() & started, "espeak-ng went on synthesising words nobody waited for"
    assert ("espeak", "en-us", 1.0, long_text) not in tts.kept  # nothing kept of it
