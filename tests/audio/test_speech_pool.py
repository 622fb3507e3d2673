"""Many calls at once: the speech worker pool ends with the run and on SIGTERM, a scripted call transcribes
nothing while it talks and has every reply's words after it, and the run records how late its frames left
(against absolute deadlines that do not drift) and how late its event loop ran."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.voice import needs_voice, realtime_agent  # noqa: F401  (a fixture)
from lifeline import alive
from speech_keeper import without_keeper
from tamesu.audio.lag import LoopLag
from tamesu.audio.pacing import Pacer, percentile
from tamesu.audio.pool import KEEPER_VAR

SUITE = """\
targets:
  bella: {{ type: realtime, url: "{url}", mode: audio, turn_detection: commit }}
tests:
  - name: call
    target: bella
    scenario:
      script:
{steps}
"""
TWO_TURNS = """\
        - say: "Hello, I would like to book a table for two on Friday"
        - say: "Yes please, seven is perfect"
"""


def _start(project: Path, url: str, steps: str) -> subprocess.Popen[str]:
    (project / "suite.yaml").write_text(SUITE.format(url=url, steps=steps), encoding="utf-8")
    env = without_keeper({**os.environ, "NO_COLOR": "1"})  # the run's own workers, whose lifetime is tested
    return subprocess.Popen([sys.executable, "-m", "tamesu", "run", "suite.yaml", "--out", "out"], cwd=project,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _workers_of(pid: int) -> list[int]:
    """The speech workers among `pid`'s children, read from /proc: each of its threads' `children` (a worker is
    the child of the thread that started it). Every process on the machine, read every 50 ms, cost 5 ms of CPU
    a scan on a quiet machine, and many times that beside the rest of a test run, taken from the run watched."""
    found = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            children = Path(f"/proc/{pid}/task/{thread}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"tamesu.audio._worker" in cmdline:
                found.append(int(child))
    return found


def _watch_workers(process: subprocess.Popen[str], until: float) -> set[int]:
    """Every speech worker `process` has had by `until` (monotonic) or its end: one for synthesis, one for
    transcription, each started on first use."""
    seen: set[int] = set()
    while time.monotonic() < until and process.poll() is None:
        seen.update(_workers_of(process.pid))
        time.sleep(0.05)
    return seen


def _result(project: Path) -> dict:
    return json.loads(next((project / "out").glob("*/*/*/run-1/result.json")).read_text())


@pytest.mark.audio
@needs_voice
@pytest.mark.timeout(240)
def test_a_scripted_call_is_transcribed_after_it_and_its_worker_ends_with_the_run(
        realtime_agent: str, tmp_path: Path) -> None:  # noqa: F811
    process = _start(tmp_path, realtime_agent, TWO_TURNS)
    workers = _watch_workers(process, time.monotonic() + 200)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out
    assert len(workers) == 2, workers  # synthesis and transcription, one process each for the whole run
    assert not [w for w in workers if alive(w)], "a speech worker outlived the run"
    result = _result(tmp_path)
    audio = next(e["data"] for e in result["events"] if e["name"] == "audio")
    # nothing needed the agent's words live: none was transcribed while the call went on, all after it
    assert audio["transcribed_during_call"] == 0
    assert audio["transcribed_after_call"] == 2
    transcript = json.loads(next((tmp_path / "out").glob("*/*/*/run-1/transcript.json")).read_text())
    heard = [line["heard"] for line in transcript["lines"] if line["role"] == "agent"]
    assert len(heard) == 2 and all(h and len(h.split()) >= 3 for h in heard), heard
    # the frames' lateness and the loop's lag are the run's metrics
    metrics = result["metrics"]
    assert audio["frames_sent"] > 100
    assert 0 <= metrics["frame_late_ms_p50"] <= metrics["frame_late_ms_p99"] <= metrics["frame_late_ms_max"]
    assert metrics["loop_lag_ms_max"] >= metrics["loop_lag_ms_p99"] >= 0


@pytest.mark.audio
@needs_voice
@pytest.mark.timeout(240)
def test_sigterm_ends_the_speech_worker_with_the_run(realtime_agent: str, tmp_path: Path) -> None:  # noqa: F811
    steps = "".join(f'        - say: "Sentence number {n} of a long call, said slowly and clearly"\n'
                    for n in range(1, 9))
    process = _start(tmp_path, realtime_agent, steps)
    workers: set[int] = set()
    while not workers and process.poll() is None:
        workers = _watch_workers(process, time.monotonic() + 0.5)
    workers |= _watch_workers(process, time.monotonic() + 1.0)  # into the call: the synthesis worker is busy
    assert workers and all(alive(w) for w in workers)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 143, out
    assert "Traceback" not in out
    deadline = time.monotonic() + 5
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [w for w in workers if alive(w)], "a speech worker outlived SIGTERM"


def test_frames_keep_their_absolute_slots_after_the_loop_was_held_and_the_lateness_is_measured() -> None:
    async def main() -> tuple[Pacer, float, LoopLag, int]:
        pacer, sent = Pacer(), []
        lag = LoopLag()
        mark = lag.watch()

        async def send(frame: bytes) -> None:
            sent.append(frame)
            if len(sent) == 10:
                # something holds the loop for 200 ms of its own CPU (10 slots at least, more on a busy machine)
                busy_until = time.thread_time() + 0.2
                while time.thread_time() < busy_until:
                    pass

        start = time.monotonic()
        await pacer.stream([b"x"] * 50, send)
        took = time.monotonic() - start
        lag.release()
        return pacer, took, lag, mark

    pacer, took, lag, mark = asyncio.run(main())
    figures = pacer.lateness()
    assert figures["frames_sent"] == 50
    # the frame after the stall left at least 200 ms late; the ones after went at their own slots: no drift
    assert figures["frame_late_ms_max"] >= 180
    # the last frame left at its own slot (49 x 20 ms) plus its own lateness: a stream that drifts would be
    # 200 ms behind (the stall's slots), whatever the machine's load added to the last frame
    behind = took - 49 * 0.02 - pacer.lates[-1] / 1000
    assert behind < 0.1, f"the stream drifted: {took:.3f}s for 49 slots of 20 ms"
    since = lag.since(mark)
    assert since["loop_lag_ms_max"] >= 180
    # the loop's thread ran the hold itself: its CPU counts it (tamesu's own work, not the machine's)
    assert since["loop_cpu_ms"] >= 190, since
    assert since["loop_runqueue_ms"] >= 0


def test_the_percentile_is_a_measured_value() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([], 99) == 0


@pytest.mark.audio
@needs_voice
@pytest.mark.timeout(240)
def test_a_pool_started_on_a_thread_that_ended_serves_the_next_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool is the process's: a server run in a thread (a test's voice agent) may be the first to speak,
    and its thread ends with the server. The worker it started must outlive that thread (Linux's parent-death
    signal follows the thread that forked), or the next job in the process fails: test_voice_burst.py before
    test_metric_edges.py in one process did, with "the speech worker died during synthesise"."""
    import threading

    from tamesu.audio import pool, tts, voices

    monkeypatch.setenv("TAMESU_SPEECH_WORKERS", "1")
    monkeypatch.delenv(KEEPER_VAR, raising=False)  # this process's own workers
    voice = voices.find(None)
    assert voice is not None and voice.engine == "piper"
    pool.shutdown()  # a pool of this test's own, started below
    clips = []
    thread = threading.Thread(target=lambda: clips.append(asyncio.run(
        pool.run("synthesise", tts.piper_say, voice, "Spoken by a server in a thread.", 1.0))))
    try:
        thread.start()
        thread.join(180)
        assert clips and len(clips[0].samples) > 0
        workers = pool.pids()
        assert len(workers) == 1
        # the signal arrives as the thread ends: give it time to, then the worker must still be there
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert alive(workers[0]), "the speech worker died with the thread that started it"
            time.sleep(0.05)
        clip = asyncio.run(pool.run("synthesise", tts.piper_say, voice, "And the next job here.", 1.0))
        assert len(clip.samples) > 0 and pool.pids() == workers
    finally:
        pool.shutdown()


@needs_voice
@pytest.mark.timeout(240)
def test_a_call_that_opens_starts_the_synthesis_worker_with_its_voice_loaded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A call's caller waited, after the agent's greeting, for the synthesis worker to start and load Piper
    (1-10 s on a loaded machine): the worker is started and the voice loaded as the call opens (`tts.warm`),
    and the first words are then synthesised by that same worker."""
    from tamesu.audio import pool, tts, voices

    monkeypatch.setenv("TAMESU_SPEECH_WORKERS", "1")
    monkeypatch.delenv(KEEPER_VAR, raising=False)  # this process's own workers
    voice = voices.find(None)
    assert voice is not None and voice.engine == "piper"
    pool.shutdown()
    try:
        tts.warm(None)
        deadline = time.monotonic() + 180
        while not pool.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = pool.pids()
        assert len(workers) == 1, workers  # started with no synthesis asked of it yet
        clip = asyncio.run(pool.run("synthesise", tts.piper_say, voice, "The first words of the call.", 1.0))
        assert len(clip.samples) > 0 and pool.pids() == workers
    finally:
        pool.shutdown()


@pytest.mark.audio
@needs_voice
@pytest.mark.timeout(240)
def test_transcriptions_queued_hold_neither_the_loops_threads_nor_a_synthesis(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`MAX_QUEUED` long transcriptions in flight (a loaded machine's Whisper, behind): a synthesis of the other
    pool is made before any of them ends, the loop's own `asyncio.to_thread` work is not queued behind them, and
    stopping the pool ends every one of them at once. Before, the jobs waited in the loop's default executor (6
    threads on 2 cores) under one count of slots for both pools: the caller's synthesis and audio waited for the
    transcriptions, and test_voice_read_bound.py's 4 s turn_timeout call took 100-160 s at load 15."""
    import numpy as np

    from tamesu.audio import pool, stt, tts, voices
    from tamesu.audio.clip import Clip

    monkeypatch.setenv("TAMESU_SPEECH_WORKERS", "1")
    monkeypatch.delenv(KEEPER_VAR, raising=False)  # this process's own workers
    voice = voices.find(None)
    assert voice is not None and voice.engine == "piper"
    pool.shutdown()

    async def main() -> tuple[list[bool], list[bool], list[object], float]:
        spoken = await pool.run("synthesise", tts.piper_say, voice, "We open at nine and close at six.", 1.0)
        once = spoken.at(16000).samples
        await stt.transcribe_off_loop(Clip(once, 16000))  # the worker started, Whisper loaded
        long = Clip(np.concatenate([once] * int(60_000 / spoken.duration_ms + 1)), 16000)
        jobs = [asyncio.create_task(stt.transcribe_off_loop(long)) for _ in range(pool.MAX_QUEUED)]
        await asyncio.sleep(0.2)  # every job in flight
        await asyncio.wait_for(asyncio.to_thread(time.sleep, 0), 60)
        ended_before_thread = [job.done() for job in jobs]
        await pool.run("synthesise", tts.piper_say, voice, "For how many people?", 1.0)
        ended_before = [job.done() for job in jobs]
        started = time.monotonic()
        await asyncio.to_thread(pool.shutdown)
        ended = await asyncio.wait_for(asyncio.gather(*jobs, return_exceptions=True), 60)
        return ended_before_thread, ended_before, ended, time.monotonic() - started

    try:
        ended_before_thread, ended_before, ended, stop_s = asyncio.run(main())
    finally:
        pool.shutdown()
    # a thread of the loop's was free at once, and the synthesis came first (a transcription: 2 s and more)
    assert not any(ended_before_thread), ended_before_thread
    assert not any(ended_before), ended_before
    # stopped: the job in hand ends with its worker (`_STOP_WAIT_S`), the waiting ones at once
    assert all(isinstance(e, pool.PoolError) or not isinstance(e, BaseException) for e in ended), ended
    assert stop_s < 20, stop_s
