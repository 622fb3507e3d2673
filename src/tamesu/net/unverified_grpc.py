"""A gRPC channel's TLS with the certificate unchecked, as `tls.verify: false` asks (the grpc target, a2a over
gRPC, a remote agent's `grpcs://` forward, doctor's probe of either): grpc-python checks every certificate it is
given and has no switch to stop, so the channel speaks plaintext HTTP/2 to a relay that carries each of its
connections to the agent over TLS made by Python's `ssl`, which checks nothing (the name, the CA, the dates) and
still presents the `tls:` block's client certificate.

The relay asks nobody who they are, so it listens where only this user can reach it: a Unix socket in a folder
of its own, mode 0700, removed when the relay closes. On 127.0.0.1 any local process, another user's too, could
have sent calls through it to the agent under the block's client certificate while the run lasted. Where Python
has no Unix sockets (Windows) it listens on 127.0.0.1 as before.

A process killed before the relay closes (SIGKILL, a crash) leaves its folder; the folder names the process
(`tamesu-grpc-relay-PID-...`), so the next relay made, in any process of this user, removes the folders of
processes that are gone (`_remove_leftovers`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import ssl
import stat
import tempfile

from tamesu.matching import one_line
from tamesu.net.clients import os_reason
from tamesu.net.tls import TlsError, TlsSpec, readable, ssl_context

_CHUNK = 65536
_UNIX_PATH_MAX = 104
"""sun_path's size on macOS, its ending NUL included (Linux's is 108): a longer path cannot be bound."""
_PREFIX = "tamesu-grpc-relay-"
_OWNED = re.compile(re.escape(_PREFIX) + r"(\d+)-[^/]+")
_swept: set[str] = set()
"""The temporary folders this process has looked for leftovers in: once each is enough."""


def unchecked_context(spec: TlsSpec) -> ssl.SSLContext:
    """TLS that checks nothing and offers HTTP/2 (gRPC servers refuse a connection that does not negotiate
    `h2`); the block's client certificate, when it names one. Unreadable files: TlsError. The block's warning
    is said as every route says it (`ssl_context`: once per block and process, whichever route came first)."""
    ssl_context(spec)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    if spec.cert_file is not None and spec.key_file is not None:
        try:
            context.load_cert_chain(readable(spec.cert_file, "cert_file"), readable(spec.key_file, "key_file"))
        except ssl.SSLError as exc:
            raise TlsError(f"tls: cannot load the client certificate: {exc.reason or exc}") from None
    return context


class UncheckedRelay:
    """Listens from the moment it is made (a channel may dial it before the loop has run once), on a private
    Unix socket (`address`: `unix:PATH`, a gRPC target); each connection accepted is carried to `target`
    (`host:port`) over unchecked TLS. Why the last one could not be carried is kept in `failure`, for the call
    that failed to say. `close` ends the listener and every connection and removes the socket's folder. No
    socket can be made: TlsError."""

    def __init__(self, target: str, context: ssl.SSLContext, server_name: str | None, timeout: float) -> None:
        host, _, port = target.rpartition(":")
        self._host, self._port = host.strip("[]"), int(port)
        self._context = context
        self._server_name = server_name or self._host
        self._timeout = timeout
        self._folder: str | None = None
        try:
            self._listener, self.address = self._listen()
        except OSError as exc:
            self._remove()
            raise TlsError(f"tls.verify: false over gRPC: cannot make the relay's socket: {os_reason(exc)}") from None
        self._listener.setblocking(False)
        self.failure: str | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._starting = asyncio.get_running_loop().create_task(self._start())

    def _listen(self) -> tuple[socket.socket, str]:
        if not hasattr(socket, "AF_UNIX"):
            listener = socket.create_server(("127.0.0.1", 0))
            return listener, f"127.0.0.1:{listener.getsockname()[1]}"
        # mkdtemp makes the folder 0700: the socket in it is reached by this user alone, whatever its own mode
        prefix = f"{_PREFIX}{os.getpid()}-"
        _remove_leftovers(tempfile.gettempdir())
        self._folder = tempfile.mkdtemp(prefix=prefix)
        path = os.path.join(self._folder, "socket")
        if len(os.fsencode(path)) >= _UNIX_PATH_MAX:  # a long TMPDIR: too long a path to bind
            os.rmdir(self._folder)
            _remove_leftovers("/tmp")
            self._folder = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
            path = os.path.join(self._folder, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            listener.listen()
        except OSError:
            listener.close()
            raise
        return listener, f"unix:{path}"

    def _remove(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    async def _start(self) -> None:
        if self._listener.family == socket.AF_INET:
            self._server = await asyncio.start_server(self._carry, sock=self._listener)
        else:
            self._server = await asyncio.start_unix_server(self._carry, sock=self._listener)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            try:
                far_reader, far_writer = await asyncio.wait_for(asyncio.open_connection(
                    self._host, self._port, ssl=self._context, server_hostname=self._server_name,
                    ssl_handshake_timeout=self._timeout), self._timeout)
            except Exception as exc:  # any reason the agent was not reached is said by the call that failed
                said = "connect timed out" if isinstance(exc, TimeoutError) else os_reason(exc)
                self.failure = one_line(f"TLS (certificate not checked) to {self._host}:{self._port}: {said}", 300)
                return
            self.failure = None  # the latest connection is the one a failing call met
            try:
                await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))
            finally:
                far_writer.close()
        except asyncio.CancelledError:
            # `close` ends a connection still open this way; ended cancelled, Python 3.11's stream server logs it
            # as an error with its traceback ("Exception in callback ...", on stderr after every such run)
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    async def close(self) -> None:
        self._starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._starting
        if self._server is not None:
            self._server.close()
        else:
            self._listener.close()
        self._remove()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)


def _remove_leftovers(parent: str) -> None:
    """The relay folders in `parent` that a killed process left: this user's, named with a process id that no
    longer runs, their socket taking no connection (a process of the same id in another PID namespace, sharing
    this folder, still listens on its own). A folder whose owner may live is left as it is."""
    if parent in _swept or not hasattr(os, "getuid"):
        return
    _swept.add(parent)
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        owned = _OWNED.fullmatch(entry.name)
        if owned is None or _runs(int(owned.group(1))):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() \
                and not _listened_on(os.path.join(entry.path, "socket")):
            shutil.rmtree(entry.path, ignore_errors=True)


def _runs(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's process (EPERM), or a number no pid is: kept
        return True
    return True


def _listened_on(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:  # cannot tell: kept
        return True
    finally:
        probe.close()
    return True


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Bytes one way until the source ends or either side breaks; then the sink is told no more comes."""
    try:
        while chunk := await source.read(_CHUNK):
            sink.write(chunk)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
        else:  # TLS cannot half-close: the whole connection ends, and the other way with it
            sink.close()
    except (OSError, ssl.SSLError):
        sink.close()
