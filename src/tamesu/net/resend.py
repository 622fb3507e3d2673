"""A request sent again, once, when the kept-alive connection it went out on turned out to be closed.

An agent's server closes a connection that stayed idle past its keep-alive time (uvicorn and Node after 5 s,
gunicorn after 2 s). httpx checks a pooled connection before it reuses it, but the server's close can arrive
after that check and before the request is written: the request then fails with a broken pipe, a reset, or
"Server disconnected without sending a response". The wait between a simulated user's turns is often just
that long, and a loaded event loop widens the gap between the check and the write to seconds (2000 persona
conversations at 1000 at once, `bench/under_load.py`, lost 595 tests this way). Browsers send such a request
again on a new connection, whatever its method; so does this transport, once, and only when:

- an idle connection to the same origin was in the pool as the request went out (it went out on a reused one);
- the failure came before any byte of the answer (the server cannot have answered it): writing the request, or
  the connection ending or being reset before the status line;
- the body is in memory (it can be sent again unchanged).

Each resend is told to `on_resend` (the targets record it as a `resent` event); a second failure is the
request's failure, as it would have been. What this accepts, as browsers do: a server that read the whole
request on a reused connection and then reset it without a byte of answer gets it a second time.

One implementation serves both client modules over their connection-pool packages, httpx over httpcore and
httpx2 over httpcore2 (the MCP SDK's client): the same API under another name. It is what a route through a
proxy gets; every direct route is tamesu's own transport (`tamesu.net.h11_transport`), which knows which
connection a request went out on and whether a byte came back, and sends again by the same rule.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import httpx

from tamesu.net.clients import DISCONNECTED, NO_BASE_URL, NO_PARAMS, client_options, resend_reason
from tamesu.net.h11_transport import H11Transport

OnResend = Callable[[Any, str], None]
"""Told of each resend: the request (of httpx or httpx2) and why it was sent again."""

_DEFAULT_PORTS = {b"http": 80, b"https": 443}
_CORE = {"httpx": "httpcore", "httpx2": "httpcore2"}
"""The connection-pool package beneath each client module: the pool's connections are asked about an origin
in its own `Origin`."""


def resending_transport(module: ModuleType, inner: Any, on_resend: OnResend) -> Any:
    """`inner` (an `AsyncHTTPTransport` of `module`: httpx, or httpx2 for the MCP and model SDKs), with a request
    that failed on a connection the agent had closed sent again once on a new one."""
    return _transport_class(module)(inner, on_resend)


@functools.cache
def _transport_class(module: Any) -> Any:
    core: Any = importlib.import_module(_CORE[module.__name__])
    failures = (module.WriteError, module.ReadError, module.RemoteProtocolError)

    def before_the_answer(exc: Exception) -> bool:
        """A write that failed, a reset, or an end before the status line; not a malformed answer."""
        return not isinstance(exc, module.RemoteProtocolError) or str(exc) == DISCONNECTED

    class ResendingTransport(module.AsyncBaseTransport):
        def __init__(self, inner: Any, on_resend: OnResend) -> None:
            self._inner = inner
            self._on_resend = on_resend

        async def handle_async_request(self, request: Any) -> Any:
            reused = self._would_reuse(request)
            try:
                return await self._inner.handle_async_request(request)
            except failures as exc:
                if not reused or not isinstance(request.stream, module.ByteStream) or not before_the_answer(exc):
                    raise
                self._on_resend(request, resend_reason(exc))
            return await self._inner.handle_async_request(request)

        def _would_reuse(self, request: Any) -> bool:
            """Whether an idle connection to the request's origin waits in the pool (the transport keeps it as
            `_pool`, the core package's public connection pool; httpx is pinned below 0.29)."""
            pool: Any = getattr(self._inner, "_pool", None)
            if pool is None:
                return False
            connections = pool.connections
            if not connections:
                return False
            url = request.url
            port = url.port or _DEFAULT_PORTS.get(url.raw_scheme, 80)
            origin = core.Origin(url.raw_scheme, url.raw_host, port)
            return any(connection.is_idle() and connection.can_handle_request(origin) for connection in connections)

        async def aclose(self) -> None:
            await self._inner.aclose()

    return ResendingTransport


def resending_client_options(on_resend: OnResend) -> dict[str, Any]:
    """`tamesu.net.clients.client_options()` with each transport (the direct one and the proxies') resending, and the
    empty base URL and query parsed once (`tamesu.net.clients.NO_BASE_URL`). The direct route is tamesu's own
    transport (`tamesu.net.h11_transport`, which resends by the same rule); a proxy's is httpx's."""
    options = client_options()
    mounts = options["mounts"]
    if mounts:
        options["mounts"] = {pattern: None if mounted is None else resending_transport(httpx, mounted, on_resend)
                             for pattern, mounted in mounts.items()}
    options["transport"] = H11Transport(verify=options["verify"], on_resend=on_resend)
    options["base_url"], options["params"] = NO_BASE_URL, NO_PARAMS
    return options
