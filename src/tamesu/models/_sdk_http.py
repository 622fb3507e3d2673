"""The HTTP client each provider gives its SDK: httpx2's API (what the SDKs take) over aiohttp
(`tamesu.net.aio`), with the model's `tls:` block and the answer bounded as the call asks (`net.bounded`).

Every call goes through the SDK's documented method (`chat.completions.create`, `messages.create`), so the
instrumentations of the SDKs (OpenTelemetry's GenAI ones, OpenLLMetry) see each of them. One client serves a
provider's calls: aiohttp's pool is keyed by origin, so sharing it costs nothing per connection. The SDK's own
retries stay off: tamesu's `ResilientClient` retries, with jitter, Retry-After and x-should-retry honoured.
"""

from __future__ import annotations

from typing import Any

import httpx2

from tamesu.net.aio import aio_transport
from tamesu.net.bounded import bounded_transport
from tamesu.net.tls import TlsSpec

SDK_CLIENT_DEFAULTS: dict[str, Any] = {
    "timeout": httpx2.Timeout(600, connect=5.0),
    "follow_redirects": True,
}
"""What both SDKs' own clients set (test_model_sdk.py compares them); the call's own timeout wins."""

MAX_CONNECTIONS = 1000


def sdk_http_client(tls: TlsSpec | None = None) -> httpx2.AsyncClient:
    """A client for one provider's SDK; the answer's bound is the call's (`net.bounded.bounded_reading`)."""
    # a call whose connection ended at once, before any answer, is sent again once by the wire's rule (the
    # server never read it); the registry's retries, with backoff, are for everything else
    wire = aio_transport(httpx2, tls=tls, max_connections=MAX_CONNECTIONS, on_resend=_resent)
    return httpx2.AsyncClient(transport=bounded_transport(httpx2, wire, None), **SDK_CLIENT_DEFAULTS)


def sdk_timeout(seconds: float) -> httpx2.Timeout:
    """A model's `timeout` as its SDK client is given it: the same bound on connecting, reading, writing and waiting
    for a connection that the number alone sets, and the same `x-stainless-read-timeout` header. As a number, httpx2
    makes it a `Timeout` again for every request, checking it against the `SupportsFloat` protocol on the way
    (typing's runtime check: some thirty calls a model call); a `Timeout` it copies."""
    return httpx2.Timeout(seconds)


def _resent(request: object, reason: str) -> None:
    """A model call sent again by the wire: nothing to record (it is the same call; the ledger counts answers)."""


def plain(answer: object) -> Any:
    """The SDK's typed answer as the JSON it came as (the providers read it the same way whatever a server sent:
    a 200 that is not a completion reaches them as a str or a mapping with holes)."""
    to_dict = getattr(answer, "to_dict", None)
    return to_dict(warnings=False) if callable(to_dict) else answer
