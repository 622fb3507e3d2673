"""The speech work that would stall the event loop, in worker processes.

Piper's synthesis holds the GIL for tens of ms at a time (measured: with sentences being synthesised in a
thread, a 10 ms timer on the loop woke 41-43 ms late at p99, against 18 ms idle on the same loaded machine),
and every conversation's 20 ms frames wait for the loop. So synthesis and the transcription of the agent's
audio run in worker processes (`tamesu.audio._worker`), one pool for each (a synthesis never waits behind a
transcription), started on first use (once per run; `warm` starts one ahead, as a call opens), each worker
loading its model on first need and keeping it for every conversation after. At most `MAX_QUEUED` jobs of each
pool are in flight; more wait in the caller. A job waits for its reply in a thread of its pool's (`Pool.waits`),
which holds no GIL while it waits.
An audio call warms both pools as it opens (`warm`): the worker starts and loads its model while the call
connects and the agent greets, not after the greeting, where it held up the caller's first words.

Nothing outlives tamesu: the run's end shuts the workers down (`tamesu.runtime.cleanup.on_run_end`, reached
on SIGINT and SIGTERM too), as does the interpreter's exit; a worker asks Linux to kill it when its parent
dies, and inherits the run's `TAMESU_OWNERS` mark for the watchdog of `tamesu.runtime.children`.

`TAMESU_SPEECH_WORKERS` sets how many workers each pool has (default 1); `0` runs the work in threads of
this process instead. With `TAMESU_SPEECH_KEEPER` a pool borrows warm workers from a keeper instead of starting
its own (`tamesu.audio.keeper`, `KeptWorker`): the same jobs over a socket, the worker back to the keeper when
the run ends.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

from tamesu.runtime.cleanup import on_run_end

T = TypeVar("T")
MAX_QUEUED = 8
JOB_TIMEOUT_S = 120.0
"""The longest one synthesis or transcription may take before its turn fails (a hung worker is killed)."""
_STOP_WAIT_S = 5.0
KEEPER_VAR = "TAMESU_SPEECH_KEEPER"
"""The socket of a speech worker keeper (`tamesu.audio.keeper`): the run borrows its warm workers instead of
starting its own."""


class PoolError(Exception):
    """A speech worker failed, died or hung: the turn fails with this line."""


def workers() -> int:
    try:
        return max(0, int(os.environ.get("TAMESU_SPEECH_WORKERS", "1")))
    except ValueError:
        return 1


_spawner: tuple[int, ThreadPoolExecutor] | None = None
_spawner_lock = threading.Lock()


def _start_worker() -> subprocess.Popen[bytes]:
    """A worker process, started by the one thread that lasts as long as this process. Linux's parent-death
    signal (`_worker`) follows the thread that forked, not the process: a worker started on a thread that
    then ended (the event loop of a server run in a thread, an executor's thread) was killed under a pool
    that still held it, and the next job anywhere in the process failed with "the speech worker died"."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():  # a forked child has none of its parent's threads
            _spawner = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="tamesu-speech-spawner"))
        spawner = _spawner[1]
    return spawner.submit(subprocess.Popen, [sys.executable, "-m", "tamesu.audio._worker", str(os.getpid())],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).result()


class Worker:
    """A worker process of this run's own."""

    def __init__(self) -> None:
        self.process = _start_worker()
        self.pid = self.process.pid
        self.requests: IO[bytes] | None = self.process.stdin
        self.replies: IO[bytes] | None = self.process.stdout

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        """One job, blocking (run in a thread)."""
        requests, replies = self.requests, self.replies
        assert requests is not None and replies is not None
        try:
            pickle.dump((name, args), requests, protocol=pickle.HIGHEST_PROTOCOL)
            requests.flush()
            ok, value = pickle.load(replies)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):  # ValueError: its pipe closed by a stop
            raise PoolError(f"the speech worker (pid {self.pid}) died during {name}") from None
        if not ok:
            raise PoolError(f"{name} failed in the speech worker: {value}")
        return value

    def ended(self) -> bool:
        return self.process.poll() is not None

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> None:
        """Close its stdin (it exits after the job in hand); kill it if it does not."""
        with contextlib.suppress(OSError):
            stdin: IO[bytes] | None = self.process.stdin
            if stdin is not None:
                stdin.close()
        try:
            self.process.wait(_STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class KeptWorker(Worker):
    """A worker lent by the speech worker keeper at `path` (`tamesu.audio.keeper`) for this run."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = 0
        self.connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.requests = self.replies = None
        self.lock = threading.Lock()
        self.gone = False

    def _lent(self) -> None:
        """Connected, and the worker's pid read, on the first job (in a thread: the keeper may be starting a
        worker for it, which takes as long as a worker of the run's own)."""
        with self.lock:
            if self.requests is not None:
                return
            try:
                self.connection.settimeout(JOB_TIMEOUT_S)
                self.connection.connect(self.path)
                replies = self.connection.makefile("rb")
                self.pid = pickle.load(replies)
                self.connection.settimeout(None)
            except TimeoutError:
                self.gone = True
                raise PoolError(f"the speech worker keeper at {self.path} lent no worker within "
                                f"{JOB_TIMEOUT_S:g}s") from None
            except OSError as exc:
                self.gone = True
                raise PoolError(f"the speech worker keeper at {self.path} lent no worker: "
                                f"{exc.strerror or exc}") from None
            except (EOFError, pickle.UnpicklingError):
                self.gone = True
                raise PoolError(f"the speech worker keeper at {self.path} lent no worker: the worker it started "
                                "for this run died") from None
            self.replies, self.requests = replies, self.connection.makefile("wb")

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        self._lent()
        try:
            return super().call(name, args)
        except PoolError:
            self.gone = True
            raise

    def ended(self) -> bool:
        if not self.gone and self.pid:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.gone = True
        return self.gone

    def kill(self) -> None:
        """Its job hung: the worker is killed (the keeper starts another when one is next asked for)."""
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Back to the keeper: it serves the next run (after the job in hand, if any). Shut down first: a
        thread waiting on a reply wakes (a plain close leaves it waiting)."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        for stream in (self.requests, self.replies):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self.connection.close()


def _worker() -> Worker:
    path = os.environ.get(KEEPER_VAR)
    return KeptWorker(path) if path else Worker()


class Pool:
    def __init__(self, size: int) -> None:
        self.workers = [_worker() for _ in range(size)]
        self.idle: queue.Queue[Worker | None] = queue.Queue()
        """The workers free for a job; None once the pool stopped (each waiting job wakes, puts it back, fails)."""
        for worker in self.workers:
            self.idle.put(worker)
        self.closed = False
        self.waits = ThreadPoolExecutor(MAX_QUEUED, thread_name_prefix="tamesu-speech-wait")
        """The threads the jobs wait for a worker and its reply in (a loop has `MAX_QUEUED` of a pool's jobs in
        flight). In the loop's default executor (`asyncio.to_thread`: 6 threads on 2 cores) 8 jobs queued took
        every thread, and each other `to_thread` of the loop (a caller's audio prepared, a recording written, a
        synthesis of the other pool) waited behind transcriptions: test_voice_read_bound.py's call 100-160 s
        at load 15 where its turn_timeout was 4 s."""
        self.warmed: set[tuple[str, tuple[Any, ...]]] = set()
        """The loads `warm` has asked of this pool (once each: 16 calls opening at once ask one)."""

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        try:
            worker = self.idle.get(timeout=JOB_TIMEOUT_S)
        except queue.Empty:
            raise PoolError(f"no speech worker was free within {JOB_TIMEOUT_S:g}s") from None
        if worker is None:  # stopped: the next waiting job wakes too
            self.idle.put(None)
            raise PoolError(f"the speech workers were stopped before {name} had one")
        try:
            return worker.call(name, args)
        except PoolError:
            if worker.ended() and not self.closed:
                worker = self._replace(worker)
            raise
        finally:
            self.idle.put(worker)

    def _replace(self, dead: Worker) -> Worker:
        fresh = _worker()
        self.workers = [fresh if w is dead else w for w in self.workers]
        return fresh

    def kill(self) -> None:
        """A job took too long: kill the busy workers (their threads see the pipe close)."""
        for worker in self.workers:
            if not worker.ended() and worker not in list(self.idle.queue):
                worker.kill()

    def stop(self) -> None:
        self.closed = True
        for worker in self.workers:
            worker.stop()
        self.idle.put(None)  # the jobs waiting for a worker end now, not after JOB_TIMEOUT_S

    def pids(self) -> list[int]:
        return [w.pid for w in self.workers if w.pid and not w.ended()]


_pools: dict[str, Pool] = {}
"""One pool per kind of job: a synthesis (the caller's next words, a barge-in) never waits behind a
transcription of the agent's last reply, as it would in one queue."""
_lock = threading.Lock()
_slots: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Semaphore] = {}
"""The in-flight jobs of each loop and pool: with one count for both pools, `MAX_QUEUED` transcriptions queued
held back the caller's next synthesis until one of them ended."""


def _started(name: str) -> Pool:
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = Pool(workers())
            on_run_end(shutdown)
        return pool


def warm(name: str, load: str, *args: Any) -> None:
    """Start the pool `name` now, if it is not running, and have its worker run the job `load` (a model load,
    `_worker`) on a thread of its own, once per pool and load (16 calls opening at once ask one load, not 16
    jobs between the syntheses). Measured on the reference bot at load 6-10: the first transcription of a run
    waited 4-7 s for its worker to start and load Whisper, then the first synthesis as long again for Piper's,
    one after the other between the greeting and the caller's first words. A load that fails is not reported
    here: the job that needs the model fails with the reason, as it would have without the warm-up."""
    if workers() == 0:
        return
    # the pool is made here, on the caller's thread, as `run` makes it: a run that ends stops it
    pool = _started(name)
    with _lock:
        if (load, args) in pool.warmed:
            return
        pool.warmed.add((load, args))

    def load_now() -> None:
        with contextlib.suppress(PoolError):  # the run ended first (its workers stopped), or the load failed
            pool.call(load, args)

    threading.Thread(target=load_now, name=f"tamesu-speech-warm-{name}", daemon=True).start()


def pids() -> list[int]:
    """The worker processes alive now (the benchmark and the tests look)."""
    return [pid for pool in list(_pools.values()) for pid in pool.pids()]


def shutdown() -> None:
    """End the workers; a later job starts new ones."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
        _slots.clear()
    for pool in pools:
        pool.stop()


async def run(name: str, local: Callable[..., T], *args: Any) -> T:
    """The job `name` (`local(*args)` in a worker, see `_worker`) off the event loop; in a thread of this
    process when the pool is off."""
    if workers() == 0:
        return await asyncio.to_thread(local, *args)
    loop = asyncio.get_running_loop()
    slots = _slots.get((loop, name))
    if slots is None:
        slots = _slots[(loop, name)] = asyncio.Semaphore(MAX_QUEUED)
    async with slots:
        pool = _started(name)
        try:
            result: T = await asyncio.wait_for(loop.run_in_executor(pool.waits, pool.call, name, args),
                                               JOB_TIMEOUT_S)
        except TimeoutError:
            pool.kill()
            raise PoolError(f"{name} took longer than {JOB_TIMEOUT_S:g}s in the speech worker") from None
        return result


atexit.register(shutdown)
