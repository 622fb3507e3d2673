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
