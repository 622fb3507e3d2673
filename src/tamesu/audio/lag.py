"""How late the event loop runs what is due: the measure of anything that blocks it.

A frame is sent by a callback the loop runs when its slot comes; anything that holds the loop (a stage that
keeps the GIL, a long callback) delays every conversation's frames at once. One ticker per loop, shared by
every conversation in it, asks to wake every 10 ms and notes how much later than asked it woke; each
conversation reads the ticks of its own lifetime. The ticker stops when the last conversation is done.

Why it was late is told apart on Linux, from the loop thread's scheduler counters (`/proc/thread-self/
schedstat`) over the conversation's lifetime: `loop_cpu_ms`, the loop thread running (tamesu's own work,
every conversation's), and `loop_runqueue_ms`, the loop thread ready to run and waiting for a core that other
processes held. At 16 calls on 2 shared cores at load 20 the loop ran 2.4 s and waited 21 s: the lateness was
the machine's, not a stage blocking the loop.
"""

from __future__ import annotations

import asyncio
import weakref
from pathlib import Path

from tamesu.audio.pacing import percentile

TICK_S = 0.01
_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def scheduler_ms() -> tuple[float, float] | None:
    """The calling thread's time on a core and waiting in the run queue so far, in ms (None off Linux)."""
    try:
        running, waiting, _slices = _SCHEDSTAT.read_text().split()
        return int(running) / 1e6, int(waiting) / 1e6
    except (OSError, ValueError):
        return None
_monitors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = weakref.WeakKeyDictionary()


class LoopLag:
    def __init__(self) -> None:
        self.lags: list[float] = []
        """Each tick's lateness in ms, in order."""
        self._users = 0
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> tuple[int, tuple[float, float] | None]:
        """Start watching (the ticker runs while anyone watches); returns the mark `since` reads from. Called
        on the loop's thread (its scheduler counters are read)."""
        self._users += 1
        if self._task is None or self._task.done():
            self.lags.clear()
            self._task = asyncio.get_running_loop().create_task(self._tick())
        return len(self.lags), scheduler_ms()

    def release(self) -> None:
        self._users = max(0, self._users - 1)
        if self._users == 0 and self._task is not None:
            self._task.cancel()
            self._task = None

    def since(self, mark: tuple[int, tuple[float, float] | None]) -> dict[str, float]:
        """The lag since `mark`, and (Linux) the loop thread's time running and waiting for a core; called on
        the loop's thread."""
        lags = self.lags[mark[0]:]
        figures = {"loop_lag_ms_p99": round(percentile(lags, 99), 2),
                   "loop_lag_ms_max": round(max(lags, default=0.0), 2)}
        before, now = mark[1], scheduler_ms()
        if before is not None and now is not None:
            figures["loop_cpu_ms"] = round(now[0] - before[0], 1)
            figures["loop_runqueue_ms"] = round(now[1] - before[1], 1)
        return figures

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time() + TICK_S
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            now = loop.time()
            self.lags.append(max(0.0, (now - due) * 1000))
            due = now + TICK_S


def monitor() -> LoopLag:
    """The running loop's monitor."""
    loop = asyncio.get_running_loop()
    found = _monitors.get(loop)
    if found is None:
        found = _monitors[loop] = LoopLag()
    return found
