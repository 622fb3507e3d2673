"""The thin path for a provider's one kind of request: the SDK makes the first request, tamesu replays its shape.

Building a request is most of what the OpenAI and Anthropic SDKs add to an HTTP call (about 0.28 ms of CPU per
call, `bench/model_layers.py`: the options models, `_build_request`, URL merging, the headers rebuilt each
time), and for a provider that always posts JSON to one URL it never changes. So the SDK sends the first call
as it always does, and a request hook keeps the URL and headers it chose (base URL, auth, API version, user
agent, the suite's headers); every later call posts its body to that URL with those headers on the same
transport client, and its errors are made by the SDK from the response (`_make_status_error_from_response`),
as the SDK's own call would raise them. What is left to the SDK: every first call, and whatever the thin path
never does (streams, files, retries: tamesu's `ResilientClient` retries, with the SDKs' `max_retries=0`).

Each concurrent call borrows a client pair of its own (`_lease.py`), so no connection pool is shared.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2

from tamesu.models._lease import ClientLease

_NOT_REPLAYED = frozenset({"content-length", "host"})
"""Headers of the SDK's request that belong to its body or URL: httpx2 writes them for each request."""

REQUEST_ERRORS = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)
"""What the SDKs turn into a connection error (their `request_exceptions`); a timeout is one of them."""


@dataclass
class Lent:
    sdk: Any
    """The SDK's client: it sends the calls made before the shape is known, and makes the errors."""
    http: httpx2.AsyncClient
    """The transport it was given, which the thin path sends on."""


@dataclass(frozen=True)
class Shape:
    url: httpx2.URL
    headers: list[tuple[str, str]]


class ThinPost:
    """POSTs JSON to `path` of an SDK client: the first call through the SDK, the rest as its shape."""

    def __init__(self, path: str, *, make_sdk: Callable[[httpx2.AsyncClient], Any],
                 make_http: Callable[..., httpx2.AsyncClient], timeout: float, options: Mapping[str, Any],
                 timeout_error: Callable[..., Exception], connection_error: Callable[..., Exception]) -> None:
        self.path = path
        self._make_sdk = make_sdk
        self._make_http = make_http
        self._timeout = httpx2.Timeout(timeout)
        self._options = dict(options)
        self._timeout_error = timeout_error
        self._connection_error = connection_error
        self.shape: Shape | None = None
        self._per_call: set[str] = set()
        """Names of headers a call passed itself (a trace's `traceparent`): never part of the shape."""
        self.clients: ClientLease[Lent] = ClientLease(self._make, self._close)

    def _make(self) -> Lent:
        http = self._make_http(event_hooks={"request": [self._learn]})
        return Lent(self._make_sdk(http), http)

    @staticmethod
    async def _close(lent: Lent) -> None:
        await lent.sdk.close()  # closes the transport it was given too

    async def _learn(self, request: httpx2.Request) -> None:
        if self.shape is None and request.url.path.endswith(self.path):
            self.shape = Shape(request.url, [(name, value) for name, value in request.headers.multi_items()
                                             if name.lower() not in _NOT_REPLAYED | self._per_call])

    async def post(self, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        """The answer as the JSON it came as (a body that is not JSON: its text), or the SDK's error.

        `headers` are this call's own (a trace's `traceparent`), sent over the shape's and never replayed."""
        if headers:
            self._per_call.update(name.lower() for name in headers)
        async with self.clients.client() as lent:
            shape = self.shape
            if shape is None:
                options = {**self._options, "headers": dict(headers)} if headers else self._options
                try:
                    return await lent.sdk.post(self.path, cast_to=object, body=body, options=options)
                except json.JSONDecodeError as exc:
                    # a 200 that says JSON and is not: the SDK lets the decoder's error out (a run's internal
                    # error); the text it could not read goes to the provider, as on the thin path
                    return exc.doc
            # the body as the SDKs encode it (`openapi_dumps`): compact, UTF-8, no NaN
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            sent = shape.headers if not headers else \
                [*((k, v) for k, v in shape.headers if k.lower() not in self._per_call), *headers.items()]
            request = lent.http.build_request("POST", shape.url, headers=sent, content=content,
                                              timeout=self._timeout)
            try:
                response = await lent.http.send(request)
            except httpx2.TimeoutException as exc:
                raise self._timeout_error(request=request) from exc
            except REQUEST_ERRORS as exc:
                raise self._connection_error(request=request) from exc
            if response.status_code >= 400:
                raise lent.sdk._make_status_error_from_response(response) from None
            return _answer(response)


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
