"""stdout and stderr as a run needs them. A console that goes away (`tamesu run | head`, whose reader stops
reading; `> log` on a disk that fills) must not end the run: what was printed is lost, the tests still run and
their results and reports are written, as if the run had been started without a console. And a character the
stream's encoding cannot write (an agent's emoji on an ASCII or Latin-1 console) is escaped, never an error
that ends the run."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO


class _Steadfast:
    """A text stream whose writes never fail: the first failure points its file descriptor at /dev/null (so
    the interpreter's last flush, and children writing there, fail no more) and is said once on `notice`."""

    def __init__(self, stream: TextIO, name: str, notice: _Steadfast | None, runs: bool = True) -> None:
        self._stream = stream
        self._name = name
        self._notice = notice
        self._runs = runs
        """The command runs tests: its reader going away is worth a word. Another (`tamesu list | head`) ends
        its output quietly, as any command does whose reader stopped reading."""
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._went(exc)
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except OSError as exc:
                self._went(exc)

    def isatty(self) -> bool:
        return not self.gone and self._stream.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, buffer...: the stream's own
        return getattr(self._stream, name)

    def _went(self, exc: OSError) -> None:
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            nothing = os.open(os.devnull, os.O_WRONLY)
            os.dup2(nothing, self._stream.fileno())
            os.close(nothing)
        if self._notice is not None and not self._notice.gone and (self._runs or not isinstance(exc, BrokenPipeError)):
            self._notice.write(f"tamesu: {self._name} can no longer be written ({exc.strerror or exc}): what "
                               "follows is not shown; the run goes on and writes its results and reports\n")
            self._notice.flush()


def steady_streams(runs: bool = True) -> None:
    """Make sys.stdout and sys.stderr never fail a write (see the module); called once, as a command starts.
    `runs`: the command runs tests (a broken pipe is said: the run goes on)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if encoding not in ("utf8", "utf8sig"):
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]  # a TextIOWrapper's
    if isinstance(sys.stderr, _Steadfast) or sys.stdout is None or sys.stderr is None:
        return
    err = _Steadfast(sys.stderr, "stderr", None)
    sys.stdout = _Steadfast(sys.stdout, "stdout", err, runs)
    sys.stderr = err
