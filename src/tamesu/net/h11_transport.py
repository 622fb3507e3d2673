"""HTTP/1.1 for httpx's clients (and httpx2's, the model SDKs') straight on asyncio and h11, without httpcore and
anyio beneath.

A scripted REST turn is one request and one answer; under httpx's own transport, httpcore's pool and anyio's
streams and cancel scopes cost as much CPU as everything tamesu does for the turn (`python bench/transport.py`:
about half of a request's CPU, at 1 and at 100 conversations at once). This transport keeps the client (request
building, redirects, cookies, auth, event hooks, the exceptions every caller handles) and does the wire itself
with h11, the same protocol machine httpcore drives, on an asyncio protocol:

- a pool of kept-alive connections per origin (newest first; one found closed, eof'd or idle past
  `keepalive_expiry` is dropped, never used), at most `max_connections` requests in flight, bounded by the
  request's `pool` timeout;
- the `connect`, `read` and `write` timeouts of each request, as httpx names them;
- answers read as the caller asks for them: reading pauses while more than `_HIGH_WATER` bytes wait unread, so
  an agent that sends without end costs at most that much beyond what the caller keeps;
- with `on_resend`, a request that went out on a reused connection the agent had just closed, and failed before
  any byte of the answer, sent again once on a new one (the rule of `tamesu.net.resend`, its words
  `tamesu.net.clients.resend_reason`); a streamed body never is.

Only the direct route uses it: a proxy's route keeps the client module's own transport
(`tamesu.net.clients.proxy_mounts`).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import ssl
import time
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any, ClassVar

import h11
import httpx

from tamesu.net.clients import DISCONNECTED, resend_reason

_HIGH_WATER = 256 * 1024
_LOW_WATER = 64 * 1024
_MAX_HEAD = 100 * 1024
"""The largest status line and headers taken, as httpcore takes them."""

Origin = tuple[bytes, str, int]


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: what arrived, waiting to be fed to h11 as the reader asks for it."""

    def __init__(self, origin: Origin, errors: ModuleType) -> None:
        self.origin = origin
        self._errors: Any = errors
        """The client module (httpx, httpx2) whose exceptions this connection raises."""
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self.transport: asyncio.Transport | None = None
        self._arrived: collections.deque[bytes] = collections.deque()
        self._waiting_bytes = 0
        self._reading_paused = False
        self._eof = False
        self._eof_fed = False
        self.lost = False
        self._lost_because: BaseException | None = None
        self._wakeup: asyncio.Future[None] | None = None
        """What the reader or the writer waits on: more data, the end, room to write, the connection lost."""
        self._writing_paused = False
        self.answered = False
        """Whether a byte of the current request's answer has arrived."""
        self.idle_since = 0.0

    # asyncio's side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._arrived.append(data)
        self._waiting_bytes += len(data)
        if self._waiting_bytes > _HIGH_WATER and not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._lost_because = exc
        self._wake()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    # the reader's side
    @property
    def usable(self) -> bool:
        """Idle, open, and nothing arrived unasked (a server's early close or a stray byte)."""
        return not (self.lost or self._eof or self._arrived) and self.h11.our_state is h11.IDLE

    async def write(self, data: bytes, timeout: float | None) -> None:
        if self.lost or self.transport is None or self.transport.is_closing():
            raise self._gone(self._errors.WriteError)
        self.transport.write(data)
        while self._writing_paused and not self.lost:
            await self._wait(timeout, lambda: self._errors.WriteTimeout(
                f"writing the request took longer than {timeout} s"))
        if self.lost:
            raise self._gone(self._errors.WriteError)

    async def next_event(self, timeout: float | None) -> Any:
        """h11's next event, reading as much as it needs; the client module's exceptions for what went wrong."""
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise self._errors.RemoteProtocolError(str(exc)) from exc
            if event is h11.PAUSED:  # a 101 or a CONNECT answer: another protocol follows, which this is not
                raise self._errors.RemoteProtocolError("the agent switched to another protocol (HTTP 101 or "
                                                       "CONNECT), which tamesu's HTTP transport does not speak")
            if event is not h11.NEED_DATA:
                return event
            if self._arrived:
                data = self._arrived.popleft()
                self._waiting_bytes -= len(data)
                if self._reading_paused and self._waiting_bytes <= _LOW_WATER and self.transport is not None:
                    self._reading_paused = False
                    self.transport.resume_reading()
                self.answered = True
                self.h11.receive_data(data)
                continue
            if self.lost and self._lost_because is not None:
                raise self._gone(self._errors.ReadError)
            if self._eof or self.lost:
                if self.h11.their_state is h11.SEND_RESPONSE and not self.answered:
                    raise self._errors.RemoteProtocolError(DISCONNECTED)
                if self._eof_fed:  # h11 asks for more after the end: cannot happen, but never spin
                    raise self._errors.RemoteProtocolError("the connection ended in the middle of the answer")
                self._eof_fed = True
                self.h11.receive_data(b"")
                continue
            await self._wait(timeout, lambda: self._errors.ReadTimeout(f"no answer within {timeout} s"))

    async def _wait(self, timeout: float | None, timed_out: Callable[[], Exception]) -> None:
        """Until the connection has news (`_wake`), or `timeout` seconds: then `timed_out()` is raised."""
        self._wakeup = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._wakeup
        except TimeoutError:
            raise timed_out() from None
        finally:
            self._wakeup = None

    def _gone(self, kind: type[Exception]) -> Exception:
        because = self._lost_because
        if because is None:
            return kind("the connection was closed") if kind is self._errors.WriteError else kind(DISCONNECTED)
        error = kind(str(because) or type(because).__name__)
        error.__cause__ = because
        return error

    def close(self) -> None:
        """Drop the connection now (an unread answer, a broken exchange): no orderly goodbye to wait for."""
        self.lost = True
        if self.transport is not None:
            self.transport.abort()


class _BodyCore:
    """The answer's bytes as they arrive; closing it returns the connection to the pool, or drops it when the
    answer was not read to its end. (Made a stream of its client module by `_Body` and `_classes`.)"""

    module: ClassVar[Any]

    def __init__(self, owner: _TransportCore, connection: _Connection, read_timeout: float | None) -> None:
        self._owner = owner
        self._connection = connection
        self._read_timeout = read_timeout
        self._complete = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._complete:
            event = await self._connection.next_event(self._read_timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True
            elif isinstance(event, h11.ConnectionClosed):
                raise self.module.RemoteProtocolError("the connection ended in the middle of the answer")

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._owner._finished(self._connection, reusable=self._complete)


class _TransportCore:
    """The transport, for any client module with httpx's API (made one of its transports by `H11Transport` and
    `_classes`)."""

    module: ClassVar[Any]
    body: ClassVar[type[_BodyCore]]

    def __init__(self, *, verify: ssl.SSLContext, on_resend: Any = None, max_connections: int = 100,
                 max_keepalive: int = 20, keepalive_expiry: float = 5.0) -> None:
        self._verify = verify
        self._on_resend = on_resend
        """Told of each request sent again (`tamesu.net.resend.OnResend`); None: nothing is sent again."""
        self._slots = asyncio.Semaphore(max_connections)
        self._max_keepalive = max_keepalive
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._closed = False

    async def handle_async_request(self, request: Any) -> Any:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        url = request.url
        scheme = url.raw_scheme
        if scheme not in (b"http", b"https"):
            named = scheme.decode(errors="replace")
            raise self.module.UnsupportedProtocol(f"the URL's scheme {named!r} is not http(s)")
        origin: Origin = (scheme, url.raw_host.decode("ascii"), url.port or (443 if scheme == b"https" else 80))
        if self._slots.locked():
            try:
                async with asyncio.timeout(timeouts.get("pool")):
                    await self._slots.acquire()
            except TimeoutError:
                raise self.module.PoolTimeout("no connection became free in time") from None
        else:
            await self._slots.acquire()  # free: taken at once, no timer to set
        try:
            connection = self._reuse(origin)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(origin, timeouts.get("connect"))
            try:
                return await self._exchange(connection, request, timeouts)
            except (self.module.WriteError, self.module.ReadError, self.module.RemoteProtocolError) as exc:
                self._drop(connection)
                if not (reused and not connection.answered and self._on_resend is not None
                        and isinstance(request.stream, self.module.ByteStream)):
                    raise
                self._on_resend(request, resend_reason(exc))
            except BaseException:
                self._drop(connection)
                raise
            connection = await self._connect(origin, timeouts.get("connect"))
            try:
                return await self._exchange(connection, request, timeouts)
            except BaseException:
                self._drop(connection)
                raise
        except BaseException:
            self._slots.release()
            raise

    def _reuse(self, origin: Origin) -> _Connection | None:
        waiting = self._idle.get(origin)
        now = time.monotonic()
        while waiting:
            connection = waiting.pop()
            if connection.usable and now - connection.idle_since < self._keepalive_expiry:
                return connection
            self._drop(connection)
        return None

    async def _connect(self, origin: Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        secure = scheme == b"https"
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(origin, self.module), host, port, ssl=self._verify if secure else None,
                    server_hostname=host if secure else None)
        except TimeoutError:
            raise self.module.ConnectTimeout(f"connecting to {host}:{port} took longer than {timeout} s") from None
        except OSError as exc:
            raise self.module.ConnectError(str(exc) or type(exc).__name__) from exc
        self._open.add(connection)
        return connection

    async def _exchange(self, connection: _Connection, request: Any,
                        timeouts: dict[str, float | None]) -> Any:
        connection.answered = False
        machine = connection.h11
        write_timeout = timeouts.get("write")
        try:
            head = machine.send(h11.Request(method=request.method, target=request.url.raw_path,
                                            headers=request.headers.raw))
            if isinstance(request.stream, self.module.ByteStream):
                body = b"".join(request.stream)  # a redirect's request holds its body unread
                await connection.write(head + machine.send(h11.Data(data=body)) + machine.send(h11.EndOfMessage())
                                       if body else head + machine.send(h11.EndOfMessage()), write_timeout)
            else:
                await connection.write(head, write_timeout)
                async for chunk in request.stream:
                    if chunk:
                        await connection.write(machine.send(h11.Data(data=chunk)), write_timeout)
                await connection.write(machine.send(h11.EndOfMessage()), write_timeout)
        except h11.LocalProtocolError as exc:
            raise self.module.LocalProtocolError(str(exc)) from exc
        read_timeout = timeouts.get("read")
        while True:
            event = await connection.next_event(read_timeout)
            if isinstance(event, h11.Response):
                break
            if isinstance(event, h11.ConnectionClosed):
                raise self.module.RemoteProtocolError(DISCONNECTED)
            # an informational answer (100 Continue, 103 Early Hints): the real one follows
        return self.module.Response(event.status_code, headers=event.headers.raw_items(),
                                    stream=self.body(self, connection, read_timeout),
                                    extensions={"http_version": b"HTTP/" + event.http_version,
                                                "reason_phrase": event.reason})

    def _finished(self, connection: _Connection, *, reusable: bool) -> None:
        self._slots.release()
        machine = connection.h11
        if (reusable and machine.our_state is h11.DONE and machine.their_state is h11.DONE and not connection.lost
                and not self._closed):
            machine.start_next_cycle()
            connection.idle_since = time.monotonic()
            waiting = self._idle.setdefault(connection.origin, [])
            waiting.append(connection)
            if len(waiting) > self._max_keepalive:
                self._drop(waiting.pop(0))
        else:
            self._drop(connection)

    def _drop(self, connection: _Connection) -> None:
        self._open.discard(connection)
        connection.close()

    async def aclose(self) -> None:
        self._closed = True  # an answer still being read drops its connection when it ends
        for connection in list(self._open):
            self._drop(connection)
        self._idle.clear()


class _Body(_BodyCore, httpx.AsyncByteStream):
    module: ClassVar[Any] = httpx


class H11Transport(_TransportCore, httpx.AsyncBaseTransport):
    """The transport beneath an httpx client."""

    module: ClassVar[Any] = httpx
    body: ClassVar[type[_BodyCore]] = _Body


@functools.cache
def _classes(module: ModuleType) -> type[_TransportCore]:
    body = type("H11Body", (_BodyCore, module.AsyncByteStream), {"module": module})
    return type("H11Transport", (_TransportCore, module.AsyncBaseTransport), {"module": module, "body": body})


def h11_transport(module: ModuleType, **options: Any) -> Any:
    """The transport beneath a client of `module`: httpx, or httpx2 (the model SDKs' client, the same API over its
    own exception classes). `options` are `H11Transport`'s."""
    return H11Transport(**options) if module is httpx else _classes(module)(**options)
