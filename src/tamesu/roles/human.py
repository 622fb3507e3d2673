"""A person answering for the user (`--interactive`): the question on stderr, the answer one line of stdin.

stdin is read by one daemon thread for the whole process, so waiting for a person never blocks the event
loop, a timeout leaves no thread behind that would keep the process alive, and piped input (a test, a script)
works exactly like a terminal. Questions are asked one at a time even when tests run in parallel.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TextIO

_EOF = None


class StdinLines:
    """Lines of a stream, read in a daemon thread and handed to the event loop that asked for them."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[str | None] | None = None
        self._started = False
        self._eof = False

    @property
    def ended(self) -> bool:
        """The stream has ended: no line will ever come."""
        return self._eof

    async def next_line(self, timeout: float) -> str | None:
        """The next line without its newline; None at end of input or after `timeout` seconds."""
        if self._eof:
            return None
        if self._queue is None:
            self._queue = asyncio.Queue()
        if not self._started:
            self._started = True
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._read, args=(loop, self._queue), daemon=True,
                             name="tamesu-stdin").start()
        try:
            async with asyncio.timeout(timeout):
                line = await self._queue.get()
        except TimeoutError:
            return None
        if line is _EOF:
            self._eof = True
            return None
        return line

    def _read(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        while True:
            line = self._stream.readline()
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\r\n") if line else _EOF)
            except RuntimeError:
                return  # the loop is closed: nobody is asking any more
            if not line:
                return


class Human:
    """Asks a person for the next user turn."""

    def __init__(self, lines: StdinLines | None = None, out: TextIO | None = None) -> None:
        self._lines = lines or StdinLines(sys.stdin)
        self._out = out or sys.stderr
        self._lock = asyncio.Lock()
        self.silence: str | None = None
        """Why the last `ask` got no reply (`no reply within 5s`, `an empty line`, `stdin ended`), or None."""

    async def ask(self, case_id: str, turn: int, question: str, hint: str | None, timeout: float) -> str | None:
        """The person's reply, or None (an empty line, end of input, or no answer within `timeout`)."""
        async with self._lock:
            self._out.write(f"\n? [{case_id}] the agent awaits input after turn {turn}:\n")
            self._out.write(f"  Agent: {question.strip() or '(no text)'}\n")
            if hint:
                self._out.write(f"  Hint: {hint}\n")
            self._out.write(f"  Your reply (an empty line gives no input; {timeout:g}s): ")
            self._out.flush()
            reply = await self._lines.next_line(timeout)
            if reply is None:
                self._out.write("\n  (no reply)\n")
            self._out.flush()
            # read by the caller as soon as this returns: no other question can be asked in between
            self.silence = None if reply is not None and reply.strip() else "an empty line" if reply is not None \
                else "stdin ended" if self._lines.ended else f"no reply within {timeout:g}s"
        return reply.strip() or None if reply is not None else None
