"""`mcp-server.log`: what an MCP server started by tamesu writes on stderr (and, started for its URL, on stdout),
with every secret masked before it reaches the disk.

The server was handed the file itself and the file was masked when the target closed: until then, and for good
when tamesu was killed (SIGKILL, a second Ctrl-C cutting the clean-up short), a server printing its
`env: {TOKEN: "{{secrets.X}}"}` left the token on disk in plain text. The server now writes into a pipe that
the event loop reads: each line is masked, then written. A line is held up to `LINE_LIMIT` bytes; past it, what
was held is written and the rest of the line is dropped, said in the log (a secret in the dropped part is never
written)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

LINE_LIMIT = 1 << 20
"""The most of one line held before it is written (a server's log line is far shorter)."""
_CHUNK = 65_536
_DRAIN_CHUNKS = 4_096
"""At most this many chunks (256 MiB) are read at close: a server still writing cannot hold the close up."""


class MaskedLog:
    """The log file and the pipe the server writes into (`fileno()`, its stdout and stderr)."""

    def __init__(self, path: Path, mask: Callable[[str], str]) -> None:
        self._mask = mask
        self._file = path.open("w", encoding="utf-8")
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self._partial = bytearray()
        self._dropped = 0
        """Bytes of the current line past LINE_LIMIT, not kept."""
        self.empty = True
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._read, self._pump)

    def fileno(self) -> int:
        """What the server's stderr (and stdout) is: the pipe's writing end."""
        return self._write

    def write(self, text: str) -> int:
        """A line of tamesu's own about the server (a stdout line that was no JSON-RPC message), masked."""
        if self._file.closed:
            raise ValueError("the server's log is closed")
        if text:
            self._file.write(self._mask(text))
            self._file.flush()
            self.empty = False
        return len(text)

    def flush(self) -> None:
        """What the server wrote so far reaches the file (a failed start quotes its stderr's last lines)."""
        if not self._file.closed:
            self._drain(_DRAIN_CHUNKS)
            self._file.flush()

    def close(self) -> None:
        if self._file.closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop already closed: it reads nothing more
            self._loop.remove_reader(self._read)
        os.close(self._write)
        self._drain(_DRAIN_CHUNKS)
        self._end_line()
        os.close(self._read)
        self._file.close()

    def _pump(self) -> None:
        if self._chunk() is False:  # the pipe ended or broke: nothing more will come
            self._loop.remove_reader(self._read)
        self._file.flush()  # on disk as it comes: the file is what a killed run leaves

    def _drain(self, most: int) -> None:
        for _ in range(most):
            if not self._chunk():
                return

    def _chunk(self) -> bool | None:
        """One chunk from the pipe into the file: True; None when nothing is there now, False when it ended."""
        try:
            data = os.read(self._read, _CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            return False
        if not data:
            return False
        self._feed(data)
        return True

    def _feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._hold(data[start:end])
            self._end_line()
            start = end + 1
        self._hold(data[start:])

    def _hold(self, piece: bytes) -> None:
        room = LINE_LIMIT - len(self._partial)
        if self._dropped or len(piece) > room:
            kept = max(room, 0) if not self._dropped else 0
            self._partial += piece[:kept]
            self._dropped += len(piece) - kept
        else:
            self._partial += piece

    def _end_line(self) -> None:
        if not self._partial and not self._dropped:
            return
        line = self._mask(self._partial.decode("utf-8", errors="replace"))
        if self._dropped:
            line += f" [... {self._dropped} more bytes of this line not kept: a line is kept up to {LINE_LIMIT} bytes]"
        self._file.write(line + "\n")
        self.empty = False
        self._partial.clear()
        self._dropped = 0


def discard(path: Path, log: MaskedLog) -> None:
    """Closes the log, and removes it when the server wrote nothing."""
    log.close()
    if log.empty:
        with contextlib.suppress(OSError):
            path.unlink()
