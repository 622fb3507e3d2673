"""aiohttp beneath the httpx API: the transport every HTTP client of tamesu's is given.

tamesu's routes speak httpx's API (the rest target, hooks, the `http` check, the remote agents) or httpx2's (the
MCP and model SDKs: the same API), because the SDKs take such a client; beneath it, this transport sends each
request with aiohttp, whose C parser and connection pool cost a quarter of httpcore's CPU (`bench/transport.py`).
What it keeps from the connection layer:

- TLS as `tamesu.net.tls` builds it (the platform's store, a `tls:` block's CA, client certificate, name);
- happy eyeballs (RFC 8305: a black-holed IPv6 address costs 250 ms, not the connect timeout);
- the environment's proxies, read once (`HTTP_PROXY`, `HTTPS_PROXY` through CONNECT, `ALL_PROXY`, `NO_PROXY`;
  never for a loopback host: `tamesu.net.proxies`);
- an answer that comes while the body is still being sent (a 413 before the upload ends) is read and returned,
  never an error: aiohttp reads the answer beside the writing;
- a request whose connection failed before any byte of the answer, within `RESEND_WITHIN` of being sent, with
  its body in memory, is sent again once on a new connection (the agent's server closed a kept-alive connection
  as the request went out: gunicorn after 2 s idle; tamesu's own idle connections are dropped after 2 s, well
  before uvicorn's and Node's 5 s) and `on_resend` is told; a request the
  agent worked on for longer, or a streamed body, never is. aiohttp itself sends an idempotent request (GET,
  PUT, DELETE...) again once by RFC 9112's rule; this rule covers the rest (POST, a turn).

Failures become the client module's own exceptions (ConnectError, ReadTimeout...), raised from aiohttp's, so
every caller's handling stays; a TLS failure's words are `tamesu.net.tls.tls_reason`'s.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any

import aiohttp

from tamesu.net.proxies import proxy_for
from tamesu.net.tls import TlsSpec, deferred_context, tls_reason

OnResend = Callable[[Any, str], None]
"""Told of each resend: the request (of httpx or httpx2) and why it was sent again."""

RESEND_WITHIN = 2.5
"""Seconds: a connection that failed later than this after the request went out may have been worked on. Not
shorter: at 1000 conversations at once the loop lags by a second or more between writing a request and seeing
the connection's end (`bench/persona.py --at-once 1000` lost 52 of 2000 tests to the keep-alive race at 1 s)."""

KEEPALIVE_EXPIRY = 2.0
"""Seconds a connection is kept idle: well below uvicorn's and Node's 5 s, because the server's clock starts when
it sends an answer and tamesu's when it has read it, which a loop lagging at 1000 conversations at once makes
seconds later (at 4 s, 250 of 10,000 agent turns and 16 of 10,000 model calls met a connection the server had
just closed; `bench/persona.py --at-once 1000`). gunicorn's 2 s is left to the resend."""

DISCONNECTED = "Server disconnected without sending a response."
"""httpcore's words for a connection that ended before the status line, kept so callers' checks still hold."""

HAPPY_EYEBALLS_DELAY = 0.25


def tcp_connector(*, limit: int, keepalive_expiry: float) -> aiohttp.TCPConnector:
    """aiohttp's connection pool as every client of tamesu's opens it: idle connections dropped after
    `keepalive_expiry`, happy eyeballs. Its own TLS default is never used: every request that opens a TLS
    connection carries `tamesu.net.tls`'s context (`with_tls`)."""
    return aiohttp.TCPConnector(limit=limit, keepalive_timeout=keepalive_expiry,
                                happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY)


def with_tls(options: dict[str, Any], context: Callable[[], ssl.SSLContext | bool], scheme: str,
             proxy: str | None) -> None:
    """TLS as `tamesu.net.tls` builds it for a request to an https URL or through an https proxy (aiohttp hands a
    request's context to the proxy's connection too); a plain request leaves the store unloaded."""
    if scheme == "https" or (proxy is not None and proxy.startswith("https:")):
        options["ssl"] = context()


def resend_reason(exc: BaseException) -> str:
    """Why a request was sent again on a new connection (the `resent` event's reason)."""
    return f"the connection ended before any answer ({_words(exc)})"


def _words(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _os_words(exc: OSError) -> str:
    return os.strerror(exc.errno) if exc.errno and exc.errno > 0 else (exc.strerror or _words(exc))


def aio_transport(module: ModuleType, *, tls: TlsSpec | None = None, on_resend: OnResend | None = None,
                  max_connections: int = 100, keepalive_expiry: float = KEEPALIVE_EXPIRY,
                  resend_if: Callable[[Any], bool] | None = None) -> Any:
    """A transport for a client of `module` (httpx, or httpx2 for the MCP and model SDKs) over its own aiohttp
    session, opened on the first request (it belongs to the running loop) and closed with the client.
    `resend_if(request)`: whether a request of a non-idempotent method may be sent again at all (an MCP
    `tools/call` never is: a server that acted on it and then dropped the connection would act twice)."""
    return _classes(module)[0](tls=tls, on_resend=on_resend, max_connections=max_connections,
                               keepalive_expiry=keepalive_expiry, resend_if=resend_if)


@functools.cache
def _classes(module: Any) -> tuple[Any, Any]:
    class Body(module.AsyncByteStream):  # type: ignore[misc]  # httpx's or httpx2's, chosen at run time
        def __init__(self, response: aiohttp.ClientResponse, request: Any) -> None:
            self._response, self._request = response, request

        def __aiter__(self) -> Body:
            return self

        async def __anext__(self) -> bytes:
            try:
                chunk = await self._response.content.readany()
            except Exception as exc:
                raise mapped(module, exc, self._request.url.host, answered=True, request=self._request) from exc
            if not chunk:
                raise StopAsyncIteration
            return chunk

        async def aclose(self) -> None:
            if self._response.content.at_eof():
                self._response.release()  # the connection goes back to the pool
            else:
                self._response.close()  # an answer not read to its end: its connection cannot be reused

    class AioTransport(module.AsyncBaseTransport):  # type: ignore[misc]  # httpx's or httpx2's, chosen at run time
        def __init__(self, *, tls: TlsSpec | None, on_resend: OnResend | None, max_connections: int,
                     keepalive_expiry: float, resend_if: Callable[[Any], bool] | None = None) -> None:
            self._resend_if = resend_if
            self._ssl = deferred_context(tls)
            self._server_name = tls.server_name if tls is not None else None
            self._client_certificate = tls is not None and tls.cert_file is not None
            self._on_resend = on_resend
            self._limit = max_connections
            self._keepalive = keepalive_expiry
            self._session: aiohttp.ClientSession | None = None

        def _open(self) -> aiohttp.ClientSession:
            connector = tcp_connector(limit=self._limit, keepalive_expiry=self._keepalive)
            # cookies, redirects and decompression are the client module's (above): aiohttp passes answers on
            self._session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                                  auto_decompress=False, skip_auto_headers=("User-Agent",))
            return self._session

        async def handle_async_request(self, request: Any) -> object:
            session = self._session or self._open()
            url = request.url
            scheme, host = url.scheme, url.host  # properties, each worked out from the parsed URL when asked
            if scheme not in ("http", "https"):
                raise module.UnsupportedProtocol(f"the URL's scheme {scheme!r} is not http(s)")
            stream = request.stream
            in_memory = isinstance(stream, module.ByteStream)
            body: Any = b"".join(stream) if in_memory else _chunks(stream)  # a redirect's is not read yet
            headers = header_pairs(request.headers)
            if not in_memory:
                headers = [(k, v) for k, v in headers if k != "transfer-encoding"]
            timeouts = request.extensions.get("timeout", {})
            connect, pool = timeouts.get("connect"), timeouts.get("pool")
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=timeouts.get("read"),
                                            connect=None if connect is None or pool is None else connect + pool)
            proxy = proxy_for(scheme, host)
            options: dict[str, Any] = {"headers": headers, "data": body or None, "allow_redirects": False,
                                       "timeout": timeout, "proxy": proxy}
            with_tls(options, self._ssl, scheme, proxy)
            if self._server_name is not None and scheme == "https":
                options["server_hostname"] = self._server_name
            on_resend = self._on_resend
            resent = (functools.partial(on_resend, request) if on_resend is not None and in_memory
                      and request.method not in IDEMPOTENT
                      and (self._resend_if is None or self._resend_if(request)) else None)
            # the client sent a URL's `user:password@` as its Authorization header already: aiohttp refuses both
            sent = str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)
            response = await send_or_resend(session, request.method, sent, options, module=module,
                                            scheme=scheme, host=host, resent=resent,
                                            client_certificate=self._client_certificate, request=request)
            return module.Response(response.status, headers=response.raw_headers, stream=Body(response, request),
                                   extensions={"http_version": b"HTTP/1.1",
                                               "reason_phrase": (response.reason or "").encode("latin-1", "replace")})

        async def aclose(self) -> None:
            if self._session is not None:
                session, self._session = self._session, None
                await session.close()

    return AioTransport, Body


def header_pairs(headers: Any) -> list[tuple[str, str]]:
    """`headers.multi_items()` of a request's httpx or httpx2 `Headers` (each name lower-cased, in order, repeats
    kept, decoded as ASCII, else UTF-8, else Latin-1: the encoding `Headers` works out when none was set on them, and
    none is on a request's), in a few calls. `multi_items` works out the encoding (two decodes a header), then asks
    for it twice a header as it decodes each name and value: some eighty calls of a model call, whose SDK sends some
    seventeen headers. Here the names, and the values, are joined by a line break and decoded at once; a name or value
    holding a line break itself (which aiohttp refuses to send: `unsendable_header`) is read by `multi_items`."""
    raw = headers.raw
    if not raw:
        return []
    names = b"\n".join([name for name, _ in raw]).lower()
    values = b"\n".join([value for _, value in raw])
    breaks = len(raw) - 1
    if names.count(b"\n") != breaks or values.count(b"\n") != breaks:
        return list(headers.multi_items())
    for encoding in ("ascii", "utf-8"):
        try:
            return list(zip(names.decode(encoding).split("\n"), values.decode(encoding).split("\n"), strict=True))
        except UnicodeDecodeError:
            continue
    return list(zip(names.decode("iso-8859-1").split("\n"), values.decode("iso-8859-1").split("\n"), strict=True))


IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


async def _chunks(stream: Any) -> AsyncIterator[bytes]:
    async for chunk in stream:
        yield chunk


async def send_or_resend(session: aiohttp.ClientSession, method: str, url: Any, options: dict[str, Any], *,
                         module: ModuleType, scheme: str, host: str, resent: Callable[[str], None] | None,
                         client_certificate: bool, request: Any = None) -> aiohttp.ClientResponse:
    """`session.request(method, url, **options)`, sent once more on a new connection when the first ended before
    any answer within `RESEND_WITHIN` of sending (`resent` told why; None: never sent again, as for an idempotent
    method, which aiohttp resends itself, or a streamed body). Failures are `module`'s exceptions (`mapped`)."""
    while True:
        sent = time.monotonic()
        try:
            return await session.request(method, url, **options)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if (resent is None or isinstance(exc, aiohttp.ClientConnectorError)
                    or time.monotonic() - sent > RESEND_WITHIN):
                raise unanswered(module, exc, scheme, host, client_certificate=client_certificate,
                                 request=request) from exc
            resent(resend_reason(exc))
            resent = None
        except ValueError as exc:  # aiohttp refuses to write a header with a line break (looked for only then)
            unsendable = unsendable_header(options.get("headers"))
            if unsendable is None:
                raise mapped(module, exc, host, answered=False, request=request) from exc
            error = _error(module, "LocalProtocolError")(unsendable)
            error.tamesu_reason = unsendable  # type: ignore[attr-defined]  # an httpx error carries our words to net.clients
            raise error from exc
        except Exception as exc:
            raise mapped(module, exc, host, answered=False, request=request) from exc


_HTTP2_FRAME = re.compile(r"b'\\x00\\x00(?:\\x[0-9a-f]{2}|.)\\x04")
"""An HTTP/2 server's first frame (its SETTINGS: a 3-byte length, then type 4) where aiohttp's parser wanted a
status line, as its message shows the bytes."""
_SHOWN = 160
"""At most this much of a malformed answer's words (its bytes, as aiohttp's parser quotes them) in the line."""


def _cut(words: str) -> str:
    return words if len(words) <= _SHOWN else words[:_SHOWN] + "..."


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""What a header's value may not hold (a tab may stay)."""


def unsendable_header(headers: Any) -> str | None:
    """Why HTTP cannot send one of `headers` (a line break or another control character in its value: a secret
    or variable read with its file's trailing newline), naming the header, never its value; None when all can."""
    pairs = headers.items() if hasattr(headers, "items") else headers or ()  # a mapping, or (name, value) pairs
    for name, value in pairs:
        text = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        if _CONTROL.search(text):
            name = name.decode("latin-1") if isinstance(name, bytes) else name
            trimmed = text.rstrip("\r\n")
            where = "ends with a line break" if trimmed != text and not _CONTROL.search(trimmed) \
                else "holds a line break or another control character"
            return (f"the header {name}'s value {where}, which HTTP cannot carry (a secret or variable read with "
                    "its file's trailing newline?)")
    return None


def unanswered(module: ModuleType, exc: Exception, scheme: str, host: str, *, client_certificate: bool,
               request: Any = None) -> Exception:
    """`mapped` for a connection that failed before any answer, with what to do about it when that is known."""
    error = mapped(module, exc, host, answered=False, request=request)
    if (scheme == "https" and not client_certificate and tls_reason(exc) is None
            and not isinstance(exc, aiohttp.ClientConnectorError)):  # connected, then ended: not refused
        # TLS 1.3 ends the handshake before the server checks a client certificate: a server that
        # requires one resets the connection at the first request, and the client sees only that
        error.tamesu_reason = (f"the server ended the connection before answering ({_words(exc)}); "  # type: ignore[attr-defined]  # an httpx error carries our words to net.clients
                               "a server that requires a client certificate does this: give tls.cert_file and "
                               "tls.key_file")
    return error


def mapped(module: ModuleType, exc: BaseException, host: str | None, *, answered: bool,
           request: Any = None) -> Exception:
    """`exc` (aiohttp's, or asyncio's) as the client module's exception of the same meaning (`request`, the
    client module's request, when there is one: `tamesu.net.direct` sends none)."""
    tls = tls_reason(exc)
    if tls is not None:
        return _error(module, "ConnectError")(f"{tls} [{host}]", request=request)
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        # a connect error: the request never reached the agent (every route's "cannot reach", exit 3); its words
        # name the proxy, or the line would blame the agent for the proxy's refusal
        error = _error(module, "ConnectError")(_words(exc), request=request)
        error.tamesu_reason = (f"the proxy {exc.host}:{exc.port} that HTTP_PROXY / HTTPS_PROXY / ALL_PROXY name "  # type: ignore[attr-defined]  # an httpx error carries our words to net.clients
                               f"cannot be reached: {_os_words(exc.os_error)}")
        return error
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        error = _error(module, "ConnectError")(_words(exc), request=request)
        error.tamesu_reason = (f"the proxy would not connect to {host}: HTTP {exc.status} {exc.message} "  # type: ignore[attr-defined]  # as above
                               "(NO_PROXY lists the hosts to reach without it)")
        return error
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return _error(module, "ConnectTimeout")(_words(exc), request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return _error(module, "ConnectError")(str(exc.os_error) or _words(exc), request=request)
    if isinstance(exc, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        return _error(module, "ReadTimeout")(_words(exc) or "timed out reading the answer", request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        if not answered:
            return _error(module, "RemoteProtocolError")(DISCONNECTED, request=request)
        return _error(module, "RemoteProtocolError")("the connection ended in the middle of the answer",
                                                     request=request)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return _error(module, "RemoteProtocolError")(f"the answer's body was malformed or cut: {_words(exc)}",
                                                     request=request)
    if isinstance(exc, aiohttp.ClientResponseError):
        said = " ".join(str(exc.message).split())  # aiohttp's parser words it over several lines
        if _HTTP2_FRAME.search(said):
            # the request reached no HTTP/1.1 server at all: a wrong port (the agent's gRPC one), not the agent
            error = _error(module, "ConnectError")(said, request=request)
            error.tamesu_reason = ("it answered in HTTP/2 (a gRPC or HTTP/2-only port?), and this "  # type: ignore[attr-defined]  # an httpx error carries our words to net.clients
                                   "route speaks HTTP/1.1: is the url the agent's HTTP address?")
            return error
        return _error(module, "RemoteProtocolError")(f"a malformed answer: {_cut(said)}", request=request)
    if isinstance(exc, aiohttp.InvalidURL | aiohttp.NonHttpUrlClientError):
        return _error(module, "UnsupportedProtocol")(f"not a URL tamesu can reach: {_words(exc)}", request=request)
    if isinstance(exc, aiohttp.ClientOSError | aiohttp.ClientConnectionError | OSError):
        return _error(module, "ReadError" if answered else "WriteError")(_words(exc), request=request)
    if isinstance(exc, aiohttp.ClientError):
        return _error(module, "RemoteProtocolError")(_words(exc), request=request)
    return exc if isinstance(exc, Exception) else RuntimeError(_words(exc))


def _error(module: ModuleType, name: str) -> Callable[..., Exception]:
    """The client module's exception class `name` (httpx's and httpx2's have the same names, not the same types)."""
    made: Callable[..., Exception] = getattr(module, name)
    return made
