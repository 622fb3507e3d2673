"""What an audio socket sends off the turn's path: a message in the background (a tool's result, a reply the agent
asked for), and the echo of each mark the agent sends (Twilio's `mark`) once the audio sent before it has played,
those still pending at once when the agent clears its audio, as Twilio does (its own module to keep the socket's
small)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from tamesu.conversation import TurnError

Send = Callable[[str | bytes], Awaitable[None]]


class Sends:
    """The sends under way (kept, so none is collected mid-send) and the mark echoes not sent yet, each on a timer."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._marks: list[tuple[asyncio.TimerHandle, str | bytes]] = []
        self._tasks: set[asyncio.Future[None]] = set()

    def spawn(self, job: Awaitable[None]) -> None:
        """Run `job` in the background."""
        task = asyncio.ensure_future(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def send(self, message: str | bytes) -> None:
        """Send `message` in the background: a socket closed meanwhile is said by the turn that reads it."""
        self.spawn(self._send_quietly(message))

    def echo_after(self, echo: str | bytes, delay_s: float) -> None:
        """A mark's `echo`, sent in `delay_s` (when the audio sent before the mark has played)."""
        handle = asyncio.get_running_loop().call_later(delay_s, lambda: self.send(echo))
        self._marks.append((handle, echo))

    def flush_marks(self) -> None:
        """The agent cleared its audio: every mark still pending is echoed at once."""
        for handle, echo in self._marks:
            if not handle.cancelled():
                handle.cancel()
                self.send(echo)
        self._marks.clear()

    def cancel_marks(self) -> None:
        """The call is closing: no mark is echoed any more."""
        for handle, _echo in self._marks:
            handle.cancel()

    async def _send_quietly(self, message: str | bytes) -> None:
        with contextlib.suppress(TurnError):
            await self._send(message)
