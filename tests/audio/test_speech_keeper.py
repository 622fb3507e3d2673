"""The speech worker keeper (`python -m tamesu.audio.keeper SOCKET`, `TAMESU_SPEECH_KEEPER`): a run borrows warm
workers, the next run gets the same ones back with their models loaded, two runs at once get a worker each, a
worker killed by its run is replaced, a keeper that is not there fails the job in one line, the workers end
with the keeper, and no more than `--max-free` stay once the runs at once have given theirs back."""

from __future__ import annotations

import asyncio
import contextlib
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


@contextlib.contextmanager
def _keeper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str) -> Iterator[subprocess.Popen[str]]:
    """A keeper of this test's own, named in this process's environment (the pool reads it at each start)."""
    from tamesu.audio import pool

    path = tmp_path / "keeper.socket"
    process = subprocess.Popen(tied([sys.executable, "-m", "tamesu.audio.keeper", str(path), *options]),
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


@pytest.fixture
def keeper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[str]]:
    with _keeper(tmp_path, monkeypatch) as process:
        yield process


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


_HOLD = ("import asyncio, sys\nfrom tamesu.audio import pool, tts, voices\n"
         "voice = voices.find(None)\n"
         "clip = asyncio.run(pool.run('synthesise', tts.piper_say, voice, 'A run at once.', 1.0))\n"
         "print(len(clip.samples), pool.pids()[0], flush=True)\n"
         "sys.stdin.readline()\n")  # the worker is held until the test lets the run end


def test_runs_at_once_get_a_worker_each_and_no_more_than_max_free_are_kept_once_they_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: every worker started for a peak was kept for good (13 of ~270 MB after the tests at -n 4)
    with _keeper(tmp_path, monkeypatch, "--max-free", "1") as keeper:
        _three_runs_at_once(keeper)


def _three_runs_at_once(keeper: subprocess.Popen[str]) -> None:
    runs = [subprocess.Popen(tied([sys.executable, "-c", _HOLD]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        lent = set()
        for run in runs:
            assert run.stdout is not None
            said = run.stdout.readline().split()
            assert len(said) == 2 and int(said[0]) > 1000, run.communicate(timeout=5)
            lent.add(int(said[1]))
        assert len(lent) == 3 and _children(keeper.pid) == lent  # all three lent at once, the keeper's
        for run in runs:
            run.communicate("\n", timeout=60)  # the run ends: its worker goes back
            assert run.returncode == 0, run.stderr
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
    deadline = time.monotonic() + 10
    while len(_children(keeper.pid)) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _children(keeper.pid)
    assert len(left) == 1, f"the keeper kept {len(left)} workers free, --max-free 1"
    (kept,) = left
    assert kept in lent
    for ended in lent - {kept}:
        assert not alive(ended), "a worker given back beyond --max-free was kept"
    # the one kept is warm for the next run, which is lent it rather than a new one
    assert _say("The next run speaks.") == kept
    assert _children(keeper.pid) == {kept}


_HOLD_WHISPER = ("import asyncio, sys\nfrom tamesu.audio import pool, stt\n"
                 "asyncio.run(pool.run('load_whisper', stt.model))\n"
                 "print(0, pool.pids()[0], flush=True)\n"
                 "sys.stdin.readline()\n")  # a run that has only transcribed, held until the test lets it end


def _hold(script: str) -> tuple[subprocess.Popen[str], int]:
    """A run that borrows a worker (`script`: _HOLD or _HOLD_WHISPER) and holds it: the run and its worker."""
    run = subprocess.Popen(tied([sys.executable, "-c", script]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert run.stdout is not None
    said = run.stdout.readline().split()
    assert len(said) == 2, run.communicate(timeout=5)
    return run, int(said[1])


def _let_go(runs: list[subprocess.Popen[str]]) -> None:
    for run in runs:
        run.communicate("\n", timeout=60)
        assert run.returncode == 0, run.stderr


def test_the_workers_kept_free_are_the_ones_whose_models_no_other_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: the one that served fewest runs ended, whatever it held: two workers with the same Piper voice were
    # kept and the only one with Whisper ended, for the next run to load it again
    with _keeper(tmp_path, monkeypatch, "--max-free", "2") as keeper:
        runs: list[subprocess.Popen[str]] = []
        try:
            for _ in range(2):  # two runs at once, twice: two workers with Piper, each lent twice
                held = [_hold(_HOLD), _hold(_HOLD)]
                runs += [run for run, _ in held]
                piper = {worker for _, worker in held}
                _let_go([run for run, _ in held])
            assert len(piper) == 2 and _children(keeper.pid) == piper
            held = [_hold(_HOLD), _hold(_HOLD)]  # both lent again, so a run that transcribes gets a new worker
            transcriber, whisper = _hold(_HOLD_WHISPER)
            runs += [*(run for run, _ in held), transcriber]
            assert {worker for _, worker in held} == piper and whisper not in piper
            _let_go([*(run for run, _ in held), transcriber])
        finally:
            for run in runs:
                if run.poll() is None:
                    run.kill()
                    run.wait()
        deadline = time.monotonic() + 10
        while len(_children(keeper.pid)) > 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _children(keeper.pid)
        assert len(left) == 2 and whisper in left, (left, whisper, piper)
        assert len(left & piper) == 1
        ended = piper - left
        assert not alive(ended.pop()), "a worker given back beyond --max-free was kept"


def test_max_free_must_be_a_count(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tamesu.audio.keeper", str(tmp_path / "k.socket"), "--max-free",
                           "-1"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--max-free: a whole number of workers, 0 or more, not '-1'" in done.stderr, done.stderr
    assert not (tmp_path / "k.socket").exists()
