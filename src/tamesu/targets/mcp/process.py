"""A server the mcp target starts itself and then reaches over streamable HTTP (`command` with `url`).

The process gets a free port as `{{session.port}}`, its stderr goes to the run's artifacts, and it is
stopped with the session: SIGTERM to its process group, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

from tamesu.targets.mcp.errlog import MaskedLog

_POLL = 0.05
_TERM_GRACE = 3.0


def free_port() -> int:
    """A port nothing listens on now. Another process could take it before the server does; on a test
    machine that is rare, and the server then fails to start, which is reported as such."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    def __init__(self, command: str, args: list[str], env: dict[str, str], cwd: Path, errlog: MaskedLog) -> None:
        self._argv = [command, *args]
        self._env = env
        self._cwd = cwd
        self._errlog = errlog
        self._process: asyncio.subprocess.Process | None = None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process else None

    async def start(self) -> None:
        """Raises OSError when the command cannot be started."""
        self._process = await asyncio.create_subprocess_exec(
            *self._argv, cwd=self._cwd, env=self._env, stdin=asyncio.subprocess.DEVNULL,
            stdout=self._errlog.fileno(), stderr=self._errlog.fileno(),
            # its own process group, so stopping it also stops what it started (a `uv run`, a shell)
            start_new_session=True,
        )

    async def wait_listening(self, url: str, timeout: float) -> None:
        """Until something accepts connections at the URL's host and port. Raises ProcessLookupError when
        the process exits first and TimeoutError when `timeout` passes."""
        parts = urlsplit(url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        async with asyncio.timeout(timeout):
            while True:
                if self.returncode is not None:
                    raise ProcessLookupError(f"the server exited with code {self.returncode} before it listened")
                try:
                    _, writer = await asyncio.open_connection(host, port)
                except OSError:
                    await asyncio.sleep(_POLL)
                    continue
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                return

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        self._signal(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), _TERM_GRACE)
        except TimeoutError:
            self._signal(process, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), _TERM_GRACE)

    @staticmethod
    def _signal(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
