"""What every HTTP client of tamesu's shares: a client over the aiohttp transport (`tamesu.net.aio`) with TLS as
`tamesu.net.tls` builds it, and the words for why a request failed."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

import httpx

from tamesu.net.aio import DISCONNECTED, OnResend, aio_transport, resend_reason
from tamesu.net.bounded import bounded_transport
from tamesu.net.tls import TlsSpec, ssl_context, tls_reason

__all__ = ["DISCONNECTED", "NO_BASE_URL", "NO_PARAMS", "AsyncClient", "BodyTimeout", "SetCookies", "async_client",
           "client_options", "no_answer", "os_reason", "resend_reason", "ssl_context"]


class SetCookies(httpx.Cookies):
    """httpx's cookies, read from an answer only when it sets one (`Set-Cookie`, `Set-Cookie2`).

    httpx hands every answer to the standard library's cookie jar through an `email.message.Message` of its
    headers and a `urllib.request.Request`, and the jar then finds no cookie in most of them: 83 us per answer,
    a tenth of a request's CPU over `tamesu.net.aio` (docs/performance.md, issue 28's third pass). httpx2, the
    SDKs' fork of httpx, makes the same check first; what the jar holds is the same either way."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


class AsyncClient(httpx.AsyncClient):
    """`httpx.AsyncClient` whose cookies are `SetCookies` (httpx's public `cookies` property, kept as httpx
    keeps it: the setter takes what httpx's takes), and, given `total`, whose every request (a streamed one to
    its headers) ends within `total` seconds."""

    def __init__(self, *, cookies: Any = None, total: float | None = None, **options: Any) -> None:
        super().__init__(**options)
        self._set_cookies = SetCookies(cookies)
        self._total = total

    def build_request(self, *args: Any, **options: Any) -> httpx.Request:
        # httpx encodes a str header as ASCII and raised UnicodeEncodeError (an internal error) for a secret with
        # an umlaut in a hook's, the `http` check's or traces.query's header; the rest target (aiohttp) sends UTF-8
        if isinstance(headers := options.get("headers"), dict):
            options["headers"] = {name: value.encode() if isinstance(value, str) and not value.isascii() else value
                                  for name, value in headers.items()}
        return super().build_request(*args, **options)

    async def send(self, request: httpx.Request, *, stream: bool = False, **options: Any) -> httpx.Response:
        if self._total is None:
            return await super().send(request, stream=stream, **options)
        # httpx's timeouts are per read: a server answering a byte now and then held a request for ever. The
        # headers are awaited apart from the body, so a server that answered its status and then trickled (or
        # stalled) is told from one that never answered: "no answer within 1s" was said of both
        answered: httpx.Response | None = None
        try:
            async with asyncio.timeout(self._total):
                answered = await super().send(request, stream=True, **options)
                if not stream:
                    await answered.aread()
                return answered
        except (TimeoutError, httpx.TimeoutException) as exc:
            if answered is None:
                if isinstance(exc, httpx.TimeoutException):
                    raise
                raise httpx.ReadTimeout(f"no whole answer within {self._total:g}s", request=request) from None
            await answered.aclose()
            raise BodyTimeout(answered.status_code, self._total, request) from None
        except BaseException:
            if answered is not None:  # as httpx's own send, which closes an answer it failed to read
                await answered.aclose()
            raise

    @property
    def cookies(self) -> httpx.Cookies:
        return self._set_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._set_cookies = SetCookies(cookies)


class BodyTimeout(httpx.ReadTimeout):
    """The server answered its status and headers within a request's time, and not its whole body."""

    def __init__(self, status: int, within: float, request: httpx.Request | None = None) -> None:
        super().__init__(f"answered HTTP {status} but did not send its whole body within {within:g}s",
                         request=request)
        self.status = status


def no_answer(exc: BaseException, within: str) -> str:
    """What a request given up at its timeout (`within`, in seconds as the line writes them) got: its status and
    not its whole body (`BodyTimeout`), or nothing."""
    if isinstance(exc, BodyTimeout):
        return f"answered HTTP {exc.status} but did not send its whole body within {within}s"
    return f"no answer within {within}s"


def client_options(*, tls: TlsSpec | None = None, on_resend: OnResend | None = None) -> dict[str, Any]:
    """`transport` (aiohttp beneath), with the empty base URL and query parsed once, for an `httpx.AsyncClient`."""
    return {"transport": aio_transport(httpx, tls=tls, on_resend=on_resend), "base_url": NO_BASE_URL,
            "params": NO_PARAMS}


def async_client(timeout: float, *, tls: TlsSpec | None = None, max_bytes: int | None = None,
                 **options: Any) -> httpx.AsyncClient:
    """A client for requests that each have `timeout` seconds in all (a check's, a hook's, a session.open's);
    given `max_bytes`, an answer longer than that is refused (`tamesu.net.bounded.is_too_large`), not read."""
    chosen = client_options(tls=tls)
    if max_bytes is not None:
        chosen["transport"] = bounded_transport(httpx, chosen["transport"], max_bytes)
    return AsyncClient(timeout=timeout, total=timeout, **chosen, **options)


def moved(response: httpx.Response) -> str:
    """` (redirected to URL, ...)` for a redirect a hook's or check's client does not follow, else "": a backend
    that moved the path (FastAPI's `/orders` to `/orders/`) said only '307' and an empty body."""
    location = response.headers.get("location") if response.is_redirect else None
    if not location:
        return ""
    return f" (redirected to {response.url.join(location)}, which is not followed: write that URL)"


NO_BASE_URL = httpx.URL("")
NO_PARAMS = httpx.QueryParams()
"""A client's empty `base_url` and `params`, parsed once: httpx parses them again for every client it makes
(a third of making one, 6 of 17 us), and a conversation makes its own client. Both are immutable."""


def os_reason(exc: BaseException) -> str:
    """Why a connection failed, in a user's words: a TLS failure's reason (`tamesu.net.tls.tls_reason`), or the
    operating system's (Connection refused, Name or service not known) behind a wrapped error."""
    tls = tls_reason(exc)
    if tls is not None:
        return tls
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        words = getattr(seen, "tamesu_reason", None)
        if isinstance(words, str):
            return words  # the transport's own (`tamesu.net.aio`)
        if isinstance(seen, OSError) and (seen.errno or seen.strerror):
            # asyncio words refusals as "Connect call failed (addr)"; the errno says what happened.
            if seen.errno and seen.errno > 0 and not isinstance(seen, socket.gaierror):
                return os.strerror(seen.errno)
            return str(seen.strerror or seen)
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__
