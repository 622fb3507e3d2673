"""What every HTTP client of tamesu's shares, computed once for the whole process: the SSL context (building it
loads the certificate bundle, about 25 ms each) and the proxies the environment names (httpx reads them on each
client it makes: urllib's `getproxies` walks the whole environment, 0.3 ms, a fifth of a scripted conversation's
client)."""

from __future__ import annotations

import functools
import os
import socket
import ssl
from collections.abc import Callable
from types import ModuleType
from typing import Any

import certifi
import httpx


@functools.cache
def ssl_context() -> ssl.SSLContext:
    # the same trust store httpx uses by default, built once
    return ssl.create_default_context(cafile=certifi.where())


@functools.cache
def environment_proxies() -> dict[str, str | None]:
    """HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY as httpx reads them (URL pattern: proxy URL, or None for
    "no proxy"), read once: tamesu does not change its own environment while it runs."""
    # httpx's own reading (private, pinned below 0.29 in pyproject), so the patterns are exactly the ones
    # `trust_env=True` would mount
    from httpx._utils import get_environment_proxies

    return get_environment_proxies()


def proxy_mounts(verify: ssl.SSLContext, module: ModuleType = httpx) -> dict[str, Any] | None:
    """What `trust_env=True` mounts on a client of `module` (httpx, or httpx2 for the MCP and model SDKs: the same
    API), from the proxies read once; None when there are none. A client given a transport of its own reads no
    proxies from the environment: it needs these mounted."""
    found = environment_proxies()
    if not found:
        return None
    return {pattern: None if url is None else module.AsyncHTTPTransport(verify=verify, proxy=module.Proxy(url))
            for pattern, url in found.items()}


def client_options() -> dict[str, Any]:
    """`verify`, `trust_env` and `mounts` for an `httpx.AsyncClient` that honours the environment's proxies as
    `trust_env=True` does, without reading the environment again (the SSL context is ours: SSL_CERT_FILE and
    SSL_CERT_DIR, the rest of what trust_env reads, do not apply to it)."""
    context = ssl_context()
    return {"verify": context, "trust_env": False, "mounts": proxy_mounts(context)}


def async_client(timeout: float, **options: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=timeout, **client_options(), **options)


NO_BASE_URL = httpx.URL("")
NO_PARAMS = httpx.QueryParams()
"""A client's empty `base_url` and `params`, parsed once: httpx parses them again for every client it makes
(a third of making one, 6 of 17 us), and a conversation makes its own client. Both are immutable."""


def layered_proxy_mounts(module: ModuleType, layered: Callable[[Any], Any]) -> dict[str, Any] | None:
    """`proxy_mounts` for a client of `module` whose own transport is `layered(...)` (a bound on the answer's
    size, a resend): each proxy's transport beneath the same layers, so a proxied request is bounded alike."""
    proxies = proxy_mounts(ssl_context(), module)
    if not proxies:
        return None
    return {pattern: None if mounted is None else layered(mounted) for pattern, mounted in proxies.items()}


DISCONNECTED = "Server disconnected without sending a response."
"""httpcore's (and httpcore2's) words for a connection that ended before the status line; tamesu's own transport
(`tamesu.net.h11_transport`) says the same."""


def resend_reason(exc: BaseException) -> str:
    """Why a request was sent again on a new connection (the `resent` event's reason)."""
    return f"the agent had closed the kept-alive connection ({os_reason(exc)})"


def os_reason(exc: BaseException) -> str:
    """The operating system's words (Connection refused, Name or service not known) behind a wrapped error."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            break
        if isinstance(seen, OSError) and (seen.errno or seen.strerror):
            # asyncio words refusals as "Connect call failed (addr)"; the errno says what happened.
            if seen.errno and seen.errno > 0 and not isinstance(seen, socket.gaierror):
                return os.strerror(seen.errno)
            return str(seen.strerror or seen)
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__
