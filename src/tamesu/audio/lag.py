"""How late the event loop runs what is due: the measure of anything that blocks it.

A frame is sent by a callback the loop runs when its slot comes; anything that holds the loop (a stage that
keeps the GIL, a long callback) delays every conversation's frames at once. One ticker per loop, shared by
every conversation in it, asks to wake every 10 ms and notes how much later than asked it woke; each
conversation reads the ticks of its own lifetime. The ticker stops when the last conversation is done.
"""

from __future__ import annotations

import asyncio
import weakref

from tamesu.audio.pacing import percentile

TICK_S = 0.01
_monitors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = weakref.WeakKeyDictionary()


class LoopLag:
    def __init__(self) -> None:
        self.lags: list[float] = []
        """Each tick's lateness in ms, in order."""
        self._users = 0
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> int:
        """Start watching (the ticker runs while anyone watches); returns the mark `since` reads from."""
        self._users += 1
        if self._task is None or self._task.done():
            self.lags.clear()
            self._task = asyncio.get_running_loop().create_task(self._tick())
        return len(self.lags)

    def release(self) -> None:
        self._users = max(0, self._users - 1)
        if self._users == 0 and self._task is not None:
            self._task.cancel()
            self._task = None

    def since(self, mark: int) -> dict[str, float]:
        lags = self.lags[mark:]
        return {"loop_lag_ms_p99": round(percentile(lags, 99), 2), "loop_lag_ms_max": round(max(lags, default=0.0), 2)}

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
