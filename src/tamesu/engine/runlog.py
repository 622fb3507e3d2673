"""The run folder's `tamesu.log`: what the libraries tamesu serves and calls through log (a2a-sdk's server
tracebacks from remote agents, uvicorn, grpc, the MCP SDK) goes there, not to the console.

Without a handler of their own these records reach Python's last-resort handler, which prints every warning
and traceback on stderr, in the middle of the console's lines.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

LOG_FILE = "tamesu.log"
_LIBRARIES = ("a2a", "uvicorn", "grpc", "mcp", "httpx", "httpx2", "aiohttp", "starlette", "sse_starlette", "anyio")


class _Counting(logging.FileHandler):
    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self.records = 0
        self.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1
        super().emit(record)


@contextlib.contextmanager
def library_logs(run_dir: Path, redact: object | None = None) -> Iterator[_Counting]:
    """While inside, the libraries' WARNING-and-above records go to `run_dir/tamesu.log` only."""
    handler = _Counting(run_dir / LOG_FILE)
    handler.setLevel(logging.WARNING)
    if callable(redact):
        handler.addFilter(_Redacting(redact))
    saved = []
    for name in _LIBRARIES:
        logger = logging.getLogger(name)
        saved.append((logger, logger.propagate))
        logger.addHandler(handler)
        logger.propagate = False
    try:
        yield handler
    finally:
        for logger, propagate in saved:
            logger.removeHandler(handler)
            logger.propagate = propagate
        handler.close()


class _Redacting(logging.Filter):
    """Secrets never reach disk: the record's message is masked before it is written."""

    def __init__(self, redact: object) -> None:
        super().__init__()
        self._redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        assert callable(self._redact)
        record.msg = self._redact(record.getMessage())
        record.args = None
        if record.exc_info:
            record.msg = f"{record.msg}\n{logging.Formatter().formatException(record.exc_info)}"
            record.msg = self._redact(record.msg)
            record.exc_info = None
            record.exc_text = None
        return True
