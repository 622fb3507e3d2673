"""The thin path for a provider's one kind of request: JSON posted to one URL with fixed headers, on a transport
client of the call's own.

Building a request is most of what the OpenAI and Anthropic SDKs add to an HTTP call (about 0.28 ms of CPU per
call, `bench/model_layers.py`: the options models, `_build_request`, URL merging, the headers rebuilt each
time), and for a provider that always posts JSON to one URL it never changes. Importing an SDK costs more still
(`anthropic` 72 MB of memory, `openai` 43 MB). So the request's shape (URL and headers) is known one of two ways:

- tamesu builds it (`known`, from the provider) when the model's base URL is given, in the suite or in the
  environment variable the SDK reads: then the SDK is not imported at all unless a call fails;
- otherwise the SDK sends the first call as it always did, and a request hook keeps the URL and headers it
  chose (whatever it resolved: profiles, workload identity, the environment's headers).

Every call once the shape is known posts its body to that URL with those headers. A status of 400 or more
becomes the SDK's own exception, made by the SDK from the response (`_make_status_error_from_response`), a
timeout and a failed connection the SDK's too, so the providers read errors as the SDK's own call raised them.
What is left to the SDK: the first call of a shape tamesu does not know, and making errors (one SDK client per
provider, made when the first call fails). The SDK's retries stay off: tamesu's `ResilientClient` retries.

Each concurrent call borrows a transport client of its own (`_lease.py`), so no connection pool is shared.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from tamesu import __version__
from tamesu.models._lease import ClientLease
from tamesu.models._where import base_url_in_use
from tamesu.net.bounded import bounded_transport
from tamesu.net.clients import layered_proxy_mounts, ssl_context
from tamesu.net.h11_transport import h11_transport

_NOT_REPLAYED = frozenset({"content-length", "host"})
"""Headers of the SDK's request that belong to its body or URL: httpx2 writes them for each request."""

REQUEST_ERRORS = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)
"""What the SDKs turn into a connection error (their `request_exceptions`); a timeout is one of them."""

USER_AGENT = f"tamesu/{__version__}"
"""The user agent of a request tamesu builds itself (the SDK's own names the SDK)."""

SDK_CLIENT_DEFAULTS: dict[str, Any] = {
    "timeout": httpx2.Timeout(600, connect=5.0),
    "limits": httpx2.Limits(max_connections=1000, max_keepalive_connections=100),
    "follow_redirects": True,
}
"""What both SDKs' `DefaultAsyncHttpxClient` sets on a transport client (test_model_wire.py compares them)."""


@dataclass(frozen=True)
class Shape:
    url: httpx2.URL
    headers: list[tuple[str, str]]


def transport_client(**options: Any) -> httpx2.AsyncClient:
    """A transport client as the SDKs make theirs, with one SSL context for all (loading the certificate bundle
    again costs ~20 ms) and its answers bounded by the model target's `max_response_bytes` on every path."""
    def bounded(inner: Any) -> Any:
        return bounded_transport(httpx2, inner, None)

    # the environment's proxies beneath the same bound (a client given a transport reads none itself)
    return httpx2.AsyncClient(transport=bounded(h11_transport(httpx2, verify=ssl_context())),
                              mounts=layered_proxy_mounts(httpx2, bounded), **SDK_CLIENT_DEFAULTS, **options)


def joined_url(base_url: str, path: str) -> httpx2.URL | None:
    """`path` below `base_url` as the SDKs join them (a slash after the base, then the path without its own);
    None for a base URL with a query, whose parameters the SDKs merge their own way (left to them)."""
    base = httpx2.URL(base_url)
    if base.query or base.fragment or not base.is_absolute_url:
        return None
    raw = base.raw_path if base.raw_path.endswith(b"/") else base.raw_path + b"/"
    return base.copy_with(raw_path=raw + path.lstrip("/").encode())


def known_url(base_url: str | None, path: str, *, base_variable: str, headers_variable: str) -> httpx2.URL | None:
    """The URL of `path` when tamesu can know the SDK's request: a base URL (given, or `base_variable` as the SDK
    reads it) without a query, and the SDK's own headers variable unset (it filters those by its own rules)."""
    base = base_url_in_use(base_url, base_variable, "")
    if not base or headers_variable in os.environ:
        return None
    return joined_url(base, path)


def json_headers(api_key: str) -> dict[str, str]:
    """The headers both SDKs send with every JSON request, the key as a bearer token and tamesu's user agent."""
    return {"Authorization": f"Bearer {api_key}", "Accept": "application/json", "Content-Type": "application/json",
            "User-Agent": USER_AGENT}


def merged_headers(*mappings: Mapping[str, str]) -> list[tuple[str, str]]:
    """Header mappings merged as the SDKs merge theirs: by lower-cased name, the later one winning with its own
    spelling, each at the place its name first came."""
    merged: dict[str, tuple[str, str]] = {}
    for mapping in mappings:
        for name, value in mapping.items():
            merged[name.lower()] = (name, value)
    return list(merged.values())


class ThinPost:
    """POSTs JSON to `path` of an SDK client: as `known` says, else the first call through the SDK."""

    def __init__(self, path: str, *, make_sdk: Callable[[httpx2.AsyncClient], Any], known: Shape | None,
                 timeout: float, options: Mapping[str, Any],
                 timeout_error: Callable[..., Exception], connection_error: Callable[..., Exception]) -> None:
        self.path = path
        self._make_sdk = make_sdk
        self._timeout = httpx2.Timeout(timeout)
        self._options = dict(options)
        self._timeout_error = timeout_error
        self._connection_error = connection_error
        self.shape: Shape | None = known
        self.built_by_tamesu = known is not None
        """Whether tamesu built the shape (else the SDK's first request taught it)."""
        self._error_maker: Any = None
        """The one SDK client that makes the errors of the thin path, made when a call first fails."""
        self._per_call: set[str] = set()
        """Names of headers a call passed itself (a trace's `traceparent`): never part of the shape."""
        self.clients: ClientLease[httpx2.AsyncClient] = ClientLease(self._make, _close)

    def _make(self) -> httpx2.AsyncClient:
        if self.shape is not None:
            return transport_client()
        return transport_client(event_hooks={"request": [self._learn]})

    async def _learn(self, request: httpx2.Request) -> None:
        if self.shape is None and request.url.path.endswith(self.path):
            self.shape = Shape(request.url, [(name, value) for name, value in request.headers.multi_items()
                                             if name.lower() not in _NOT_REPLAYED | self._per_call])

    async def post(self, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        """The answer as the JSON it came as (a body that is not JSON: its text), or the SDK's error.

        `headers` are this call's own (a trace's `traceparent`), sent over the shape's and never replayed."""
        if headers:
            self._per_call.update(name.lower() for name in headers)
        async with self.clients.client() as http:
            shape = self.shape
            if shape is None:
                return await self._through_sdk(http, body, headers)
            # the body as the SDKs encode it (`openapi_dumps`): compact, UTF-8, no NaN
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            sent = shape.headers if not headers else \
                [*((k, v) for k, v in shape.headers if k.lower() not in self._per_call), *headers.items()]
            request = http.build_request("POST", shape.url, headers=sent, content=content, timeout=self._timeout)
            try:
                response = await http.send(request)
            except httpx2.TimeoutException as exc:
                raise self._timeout_error(request=request) from exc
            except REQUEST_ERRORS as exc:
                raise self._connection_error(request=request) from exc
            if response.status_code >= 400:
                if self._error_maker is None:
                    self._error_maker = self._make_sdk(http)  # only to make errors: it never sends
                raise self._error_maker._make_status_error_from_response(response) from None
            return _answer(response)

    async def _through_sdk(self, http: httpx2.AsyncClient, body: dict[str, Any],
                           headers: Mapping[str, str] | None) -> Any:
        # an SDK client for this call only, on the lent transport (which keeps the connection): once its
        # request is seen (`_learn`), no other SDK client is made to send
        sdk = self._make_sdk(http)
        options = {**self._options, "headers": dict(headers)} if headers else self._options
        try:
            return await sdk.post(self.path, cast_to=object, body=body, options=options)
        except json.JSONDecodeError as exc:
            # a 200 that says JSON and is not: the SDK lets the decoder's error out (a run's internal
            # error); the text it could not read goes to the provider, as on the thin path
            return exc.doc


async def _close(http: httpx2.AsyncClient) -> None:
    await http.aclose()  # an SDK client made on it holds nothing else (tamesu passes the key itself)


def _answer(response: httpx2.Response) -> Any:
    # as the SDKs read an answer for `cast_to=object`: JSON when the content type says so, else the text; a
    # body that says JSON and is not is given as its text too (the provider then says what came back)
    media = response.headers.get("content-type", "*").split(";")[0]
    if not media.endswith("json"):
        return response.text
    try:
        return response.json()
    except ValueError:
        return response.text
