"""Stopping a whole run early (Ctrl-C, SIGTERM) without cancelling everything at once.

The first signal moves the deadline of every conversation in flight to now: each ends the way a test's
`timeout` ends it, inside its own run, while its hooks, remote agents and target still close in order and no
new run starts. Only a second signal cancels the whole run (see `tamesu.runtime.signals`). Cancelling everything at
once cut the stop of remote agents' gRPC servers short, and grpc then crashed the interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import weakref


class RunStop:
    def __init__(self) -> None:
        self.signum: int | None = None
        self._deadlines: weakref.WeakSet[asyncio.Timeout] = weakref.WeakSet()

    @property
    def reason(self) -> str | None:
        return None if self.signum is None else f"interrupted by {signal.Signals(self.signum).name}"

    def watch(self, deadline: asyncio.Timeout) -> None:
        """A conversation's deadline: brought forward to now when the run stops (already stopped: at once)."""
        self._deadlines.add(deadline)
        if self.signum is not None:
            self._expire(deadline)

    def trigger(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        for deadline in list(self._deadlines):
            self._expire(deadline)

    @staticmethod
    def _expire(deadline: asyncio.Timeout) -> None:
        with contextlib.suppress(RuntimeError):  # a conversation that has already ended
            if not deadline.expired():
                deadline.reschedule(asyncio.get_running_loop().time())
