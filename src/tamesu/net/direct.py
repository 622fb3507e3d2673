"""aiohttp's `ClientSession` directly, with tamesu's connection layer: the client of the routes that need no
httpx API (the rest target today).

httpx's API over `tamesu.net.aio` costs a request 0.3 ms of CPU more than aiohttp's own (docs/performance.md,
issue 28's sixth pass): the request and response objects are built twice, and cookies, redirects and headers are
handled by httpx above aiohttp. This client sends with aiohttp and keeps what `tamesu.net.aio` keeps, from the
same helpers: TLS as `tamesu.net.tls` builds it, happy eyeballs, the environment's proxies (decided per hop),
an early answer read beside the upload, and the resend of a request whose connection failed at once before any
answer (`RESEND_WITHIN`, never an idempotent method: aiohttp sends those again itself). What it adds, as httpx
does it: one cookie jar per client, redirects followed up to `max_redirects` (the method turned into GET by 301,
302 and 303 as browsers do, though a body a 301 or 302 dropped so, refused there, is `DroppedBody`; `Authorization`
dropped when the origin changes, unless it is the same host moving to https; `Cookie` set again from the jar),
bodies sent as given (no `Content-Type` guessed).

Failures are httpx's exception classes with `tamesu.net.aio`'s words (`mapped`), so a route handles them as it
handles every other route's, and `tamesu.net.clients.os_reason` reads them alike. Bodies are not decoded here
(`Accept-Encoding: gzip, deflate`, as httpx asks): the caller inflates up to its own bound.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
from multidict import CIMultiDict
from yarl import URL

from tamesu import __version__
from tamesu.net.aio import (
    IDEMPOTENT,
    KEEPALIVE_EXPIRY,
    mapped,
    send_or_resend,
    tcp_connector,
    with_tls,
)
from tamesu.net.proxies import proxy_for
from tamesu.net.tls import TlsSpec, deferred_context

REDIRECTS = frozenset({301, 302, 303, 307, 308})
# a user agent that says who is calling (a suite's own `User-Agent` header wins), not aiohttp's default
DEFAULT_HEADERS = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate", "User-Agent": f"tamesu/{__version__}"}


@dataclass(slots=True)
class Request:
    """One request as a route built it: its body in memory (so it can be sent again, and on each redirect)."""

    method: str
    url: URL
    headers: CIMultiDict[str]
    body: bytes | None
    timeout: aiohttp.ClientTimeout


OnResend = Callable[[Request, str], None]
"""Told of each resend: the request and why it was sent again."""


def timeouts(pool: float, connect: float) -> aiohttp.ClientTimeout:
    """A new connection within `connect`, after at most `pool` waiting for a free one of the pool (all in use).
    The answer's reads get no timer here: the caller sends each request under a timeout of its own that bounds
    the whole request (the rest target's turn, its `session.open`), and aiohttp's `sock_read`, moved at every
    piece of the answer, was two timer handles a turn that never fired first."""
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, connect=connect + pool)


class DirectClient:
    """One `ClientSession` (its pool and cookie jar), opened on the first request in the running loop and closed
    with `aclose`."""

    def __init__(self, *, tls: TlsSpec | None = None, on_resend: OnResend | None = None, max_redirects: int = 10,
                 max_connections: int = 100, keepalive_expiry: float = KEEPALIVE_EXPIRY,
                 holds_secret: Callable[[str], bool] | None = None,
                 on_withheld: Callable[[URL, list[str]], None] | None = None) -> None:
        """`holds_secret`: whether a header's value carries one of the run's secrets (such a header is not sent on
        to another origin a redirect names, as Authorization is not); `on_withheld`: told the names it held back."""
        self._holds_secret = holds_secret
        self._on_withheld = on_withheld
        self._ssl = deferred_context(tls)
        self._server_name = tls.server_name if tls is not None else None
        self._client_certificate = tls is not None and tls.cert_file is not None
        self._on_resend = on_resend
        self._max_redirects = max_redirects
        self._limit = max_connections
        self._keepalive = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None
        # unsafe: agents on 127.0.0.1 or another address set cookies too (httpx's jar keeps them)
        self.cookies = aiohttp.CookieJar(unsafe=True)

    def _open(self) -> aiohttp.ClientSession:
        self._session = aiohttp.ClientSession(
            connector=tcp_connector(limit=self._limit, keepalive_expiry=self._keepalive),
            cookie_jar=self.cookies, auto_decompress=False, headers=DEFAULT_HEADERS,
            skip_auto_headers=("Content-Type",))
        return self._session

    async def send(self, request: Request) -> aiohttp.ClientResponse:
        """The answer to `request` after its redirects, its body unread (`chunks`, then `finish`)."""
        hops = 0
        dropped: DroppedBody | None = None
        while True:
            if hops > self._max_redirects:
                raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.")
            response = await self._send_once(request)
            location = response.headers.get("Location")
            if response.status not in REDIRECTS or location is None:
                if dropped is not None and response.status == 405:
                    finish(response)
                    raise dropped
                return response
            try:
                sent_on = redirected(request, response.status, location)
            finally:
                finish(response)
            if self._holds_secret is not None and not _same_origin(sent_on.url, request.url) \
                    and (withheld := [name for name, value in sent_on.headers.items() if self._holds_secret(value)]):
                for name in withheld:
                    sent_on.headers.popall(name, None)
                if self._on_withheld is not None:
                    self._on_withheld(sent_on.url, withheld)
            if response.status in (301, 302) and request.body is not None and sent_on.body is None:
                dropped = DroppedBody(response.status, sent_on.url)
            request = sent_on
            hops += 1

    async def _send_once(self, request: Request) -> aiohttp.ClientResponse:
        session = self._session or self._open()
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the URL's scheme {url.scheme!r} is not http(s)")
        host = url.host or ""
        proxy = proxy_for(url.scheme, host)
        options: dict[str, Any] = {"headers": request.headers, "data": request.body, "allow_redirects": False,
                                   "timeout": request.timeout, "proxy": proxy}
        with_tls(options, self._ssl, url.scheme, proxy)
        if self._server_name is not None and url.scheme == "https":
            options["server_hostname"] = self._server_name
        on_resend = self._on_resend
        resent = (functools.partial(on_resend, request) if on_resend is not None
                  and request.method not in IDEMPOTENT else None)
        return await send_or_resend(session, request.method, url, options, module=httpx, scheme=url.scheme,
                                    host=host, resent=resent, client_certificate=self._client_certificate)

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


class DroppedBody(Exception):
    """A request that a 301 or 302 sent on as a GET without its body, refused there (405): the URL moved (http://
    to https://, a path to a new one). A Post/Redirect/Get answer, whose GET is answered, is no such thing."""

    def __init__(self, status: int, location: URL) -> None:
        super().__init__(f"redirected (HTTP {status}) to {location}")
        self.status = status
        self.location = location


def redirected(request: Request, status: int, location: str) -> Request:
    """The request a redirect asks for, as httpx builds it (`httpx.AsyncClient._build_redirect_request`)."""
    try:
        url = request.url.join(URL(location))
    except ValueError as exc:
        raise httpx.RemoteProtocolError(f"Invalid URL in location header: {exc}.") from None
    method = request.method
    if (status in (302, 303) and method != "HEAD") or (status == 301 and method == "POST"):
        method = "GET"
    headers = CIMultiDict(request.headers)
    if not _same_origin(url, request.url) and not _https_upgrade(request.url, url):
        headers.popall("Authorization", None)
        headers.popall("Proxy-Authorization", None)
    headers.popall("Cookie", None)  # the jar's, for the new URL
    body = request.body
    if method != request.method and method == "GET":
        headers.popall("Content-Length", None)
        headers.popall("Transfer-Encoding", None)
        body = None
    return Request(method, url, headers, body, request.timeout)


def _same_origin(url: URL, other: URL) -> bool:
    return (url.scheme, url.host, url.port) == (other.scheme, other.host, other.port)


def _https_upgrade(url: URL, location: URL) -> bool:
    return (url.host == location.host and url.scheme == "http" and url.port == 80
            and location.scheme == "https" and location.port == 443)


async def chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The body's bytes as they come (not decoded); a failure is httpx's class, as `send`'s are."""
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except Exception as exc:
        raise mapped(httpx, exc, response.url.host, answered=True) from exc


async def whole(response: aiohttp.ClientResponse) -> bytes:
    """The body's bytes at once (not decoded), for an answer whose length bounds it; a failure is httpx's class,
    as `chunks`' are."""
    try:
        return await response.content.read()
    except Exception as exc:
        raise mapped(httpx, exc, response.url.host, answered=True) from exc


def finish(response: aiohttp.ClientResponse) -> None:
    """Done with `response`: its connection goes back to the pool when the body was read to its end, else it is
    dropped (an answer not read to its end cannot be followed by another on the same connection)."""
    if response.content.at_eof():
        response.release()
    else:
        response.close()
