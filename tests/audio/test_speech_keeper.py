"""The speech worker keeper (`python -m tamesu.audio.keeper SOCKET`, `TAMESU_SPEECH_KEEPER`): a run borrows warm
workers, the next run gets the same ones back with their models loaded, two runs at once get a worker each, a
worker killed by its run is replaced, a keeper that is not there fails the job in one line, and the workers end
with the keeper."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.voice import needs_voice
from lifeline import alive, tied
from tamesu.audio.pool import KEEPER_VAR

pytestmark = [needs_voice, pytest.mark.timeout(300)]


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/children") as children:
            found.update(int(child) for child in children.read().split())
    return found


@pytest.fixture
def keeper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[str]]:
    """A keeper of this test's own, named in this process's environment (the pool reads it at each start)."""
    from tamesu.audio import pool

    path = tmp_path / "keeper.socket"
    process = subprocess.Popen(tied([sys.executable, "-m", "tamesu.audio.keeper", str(path)]),
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == f"keeping speech workers at {path}"
    monkeypatch.setenv(KEEPER_VAR, str(path))
    monkeypatch.setenv("TAMESU_SPEECH_WORKERS", "1")
    pool.shutdown()  # the pools of this test, started below, borrow from this keeper
    try:
        yield process
    finally:
        pool.shutdown()
        if process.poll() is None:
            process.terminate()
        process.wait(10)


def _say(text: str) -> int:
    """`text` synthesised by this process's pool; the worker that did it."""
    from tamesu.audio import pool, tts, voices

    voice = voices.find(None)
    assert voice is not None and voice.engine == "piper"
    clip = asyncio.run(pool.run("synthesise", tts.piper_say, voice, text, 1.0))
    assert len(clip.samples) > 1000
    (worker,) = pool.pids()
    return worker


def test_runs_one_after_another_borrow_the_same_warm_worker_which_ends_with_the_keeper(
        keeper: subprocess.Popen[str]) -> None:
    from tamesu.audio import pool, stt

    worker = _say("The first run speaks.")
    assert _children(keeper.pid) == {worker}  # the keeper's process, not this one's
    assert worker not in _children(os.getpid())
    pool.shutdown()  # the run ends: its worker goes back to the keeper, alive and loaded
    assert alive(worker)
    took = time.monotonic()
    assert _say("The second run speaks.") == worker
    # the transcription pool borrows a second worker (the first is lent), which loads Whisper for it
    heard = asyncio.run(pool.run("transcribe", stt.transcribe, _clip("The table is booked for Friday."), 0.0))
    assert "friday" in heard.text.lower(), heard.text
    assert len(_children(keeper.pid)) == 2
    assert time.monotonic() - took < 60
    pool.shutdown()
    keeper.terminate()
    assert keeper.wait(10) == 0
    deadline = time.monotonic() + 5
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker), "a kept speech worker outlived its keeper"
    assert not _children(os.getpid()) & {worker}
    assert not Path(os.environ[KEEPER_VAR]).exists()


def _clip(text: str):  # type: ignore[no-untyped-def]
    from tamesu.audio import tts

    clip, _voice = asyncio.run(tts.say(text))
    return clip


def test_two_runs_at_once_get_a_worker_each_and_a_killed_one_is_replaced(keeper: subprocess.Popen[str]) -> None:
    from tamesu.audio import pool

    first = _say("One run.")
    # a second run's pool while the first still holds its worker: a process of its own, another worker
    script = ("import asyncio\nfrom tamesu.audio import pool, tts, voices\n"
              "voice = voices.find(None)\n"
              "clip = asyncio.run(pool.run('synthesise', tts.piper_say, voice, 'Another run.', 1.0))\n"
              "print(len(clip.samples), pool.pids()[0])\n")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert other.returncode == 0, other.stderr
    samples, second = map(int, other.stdout.split())
    assert samples > 1000 and second != first
    assert _children(keeper.pid) == {first, second}
    # the first run's job hung, say: its pool kills the worker it borrowed (`Pool.kill`), the job fails as a
    # job of a worker that died does, and the next one borrows a worker that is alive (the other run's, free now)
    (borrowed,) = pool._pools["synthesise"].workers
    borrowed.kill()
    deadline = time.monotonic() + 5
    while alive(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(first)
    with pytest.raises(pool.PoolError, match="died during synthesise"):
        _say("Into a dead worker.")
    replaced = _say("After the kill.")
    assert replaced != first and alive(replaced)
    assert first not in _children(keeper.pid)


def test_a_keeper_that_is_not_there_fails_the_job_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.audio import pool, tts, voices

    gone = tmp_path / "no-keeper.socket"
    monkeypatch.setenv(KEEPER_VAR, str(gone))
    monkeypatch.setenv("TAMESU_SPEECH_WORKERS", "1")
    pool.shutdown()
    voice = voices.find(None)
    try:
        with pytest.raises(pool.PoolError) as failed:
            asyncio.run(pool.run("synthesise", tts.piper_say, voice, "Nobody listens.", 1.0))
    finally:
        pool.shutdown()
    assert str(failed.value) == f"the speech worker keeper at {gone} lent no worker: No such file or directory"
