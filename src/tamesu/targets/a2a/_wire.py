"""Calls to the agent through a2a-sdk's client, whatever the binding: connect retries, request counting,
the gRPC channels the SDK needs, the headers as gRPC metadata."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import grpc
import httpx
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.transports.grpc import GrpcTransport
from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types.a2a_pb2 import AgentCard, StreamResponse

from tamesu.conversation import Session
from tamesu.errors import InfraError
from tamesu.net.aio import aio_transport
from tamesu.net.bounded import bounded_transport
from tamesu.net.clients import NO_BASE_URL, NO_PARAMS, AsyncClient
from tamesu.net.grpc_channels import grpc_channel
from tamesu.net.rate_limit import RateLimit, rate_limited_transport, said_as_events
from tamesu.net.tls import TlsError, TlsSpec
from tamesu.net.unverified_grpc import UncheckedRelay
from tamesu.net.urls import shown_url
from tamesu.suite.schema import ConnectSpec
from tamesu.targets.a2a._errors import speaks_http1, unreachable
from tamesu.targets.a2a._jsonrpc_ids import IdCheckingTransport
from tamesu.targets.a2a._transport import Choice, grpc_target
from tamesu.targets.bounds import DEFAULT_MAX_RESPONSE_BYTES

T = TypeVar("T")


class Wire:
    """One session's way to the agent: an httpx client of its own (see DESIGN.md on sharing one), the gRPC
    channels its SDK clients open, and a count of the calls that reached the agent."""

    def __init__(self, *, session: Session, connect: ConnectSpec, turn_timeout: float, headers: dict[str, str],
                 what: str, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 tls: TlsSpec | None = None, rate_limit_retries: int = 3) -> None:
        self._session = session
        self._connect = connect
        self._tls = tls
        self.connect_timeout = connect.timeout
        self._what = what
        self.headers = headers
        self.max_response_bytes = max_response_bytes
        # a JSON-RPC reply with another request's id is a protocol error (the SDK does not look); beneath that
        # check, no answer is read past max_response_bytes; beneath that, aiohttp (tamesu.net.aio: a call whose
        # connection ended at once, before any answer, is sent again once), and a 429 sent again after its wait
        wire = rate_limited_transport(httpx, aio_transport(httpx, tls=tls, on_resend=self._resent),
                                      RateLimit(rate_limit_retries, connect.backoff,
                                                said_as_events(session.event, session.redactor.text)))
        self.http = AsyncClient(transport=IdCheckingTransport(bounded_transport(httpx, wire, max_response_bytes,
                                                                                      self._refused)),
                                      base_url=NO_BASE_URL,
                                      params=NO_PARAMS, headers=headers,
                                      timeout=httpx.Timeout(turn_timeout + 5, connect=connect.timeout),
                                      event_hooks={"request": [self._stamp_trace]})
        self._channels: list[grpc.aio.Channel] = []
        self._relays: list[UncheckedRelay] = []
        self.requests = 0
        """Calls that reached the agent: sends, streams, polls, cancels, resubscribes, extended cards."""
        self.unreachable: str | None = None
        """Why the last attempt did not reach the agent, while it is being retried."""
        self.card_named: dict[str, str] = {}
        """URL -> what named it, for a URL the agent card gave rather than the target's url (`_errors.card_named`):
        a card naming a host only its own network knows (a container's) is the cause to say, not the url."""

    def _resent(self, request: httpx.Request, reason: str) -> None:
        self._session.event("resent", reason=reason, url=self._session.redactor.text(str(request.url)))

    def _refused(self, note: str, read: int, declared: int | None) -> None:
        self._session.event("response_truncated", limit=self.max_response_bytes, sizes={"body": read}, read=read,
                            declared=declared, complete=False, note=note)

    def grpc_refused(self, details: str) -> None:
        """A gRPC message past max_response_bytes, which the channel refused (RESOURCE_EXHAUSTED)."""
        self._session.event("response_truncated", limit=self.max_response_bytes, complete=False,
                            note=f"a gRPC message was larger than max_response_bytes ({self.max_response_bytes:,}), "
                                 f"then refused: {details}")

    async def _stamp_trace(self, request: httpx.Request) -> None:
        """Every HTTP request of a turn carries the turn's `traceparent` (unless the suite set its own)."""
        trace = self._session.trace
        if trace is not None and "traceparent" not in request.headers:
            request.headers["traceparent"] = trace.traceparent

    # -- clients --------------------------------------------------------------------------------------

    def client(self, card: AgentCard, choice: Choice, *, streaming: bool) -> Client:
        """An SDK client that speaks exactly `choice`: the card it gets lists that one interface."""
        spoken = AgentCard()
        spoken.CopyFrom(card)
        del spoken.supported_interfaces[:]
        spoken.supported_interfaces.append(choice.interface())
        spoken.capabilities.streaming = streaming
        config = ClientConfig(streaming=streaming, httpx_client=self.http,
                              grpc_channel_factory=self._channel, supported_protocol_bindings=[choice.binding])
        factory = ClientFactory(config)
        if choice.binding == "GRPC":
            # The factory finds the 0.3 gRPC transport through an import that fails quietly when a2a's server
            # modules were imported first (it then speaks 1.0 to a 0.3 interface); name the class ourselves.
            transport = CompatGrpcTransport if is_legacy_version(choice.version) else GrpcTransport
            factory.register("GRPC", lambda card, url, config: transport.create(card, url, config))
        return factory.create(spoken)

    def _channel(self, url: str) -> grpc.aio.Channel:
        # a TLS channel trusts what every other route trusts, and the target's tls: block (its CA, client
        # certificate, the name the certificate carries; verify: false through a relay, the card having been
        # read unchecked too and its warning said): it trusted the platform's store alone
        target, tls = grpc_target(url)
        try:
            channel, relay = grpc_channel(target, tls, self._tls, timeout=self.connect_timeout,
                                          options=[("grpc.max_receive_message_length", self.max_response_bytes)])
        except TlsError as exc:  # a file of the tls: block that cannot be read: said with the target
            raise InfraError(f"{self._what}: {exc}") from None
        self._channels.append(channel)
        if relay is not None:
            self._relays.append(relay)
        return channel

    def context(self, choice: Choice, timeout: float | None = None) -> ClientCallContext:
        # HTTP requests carry the headers from the httpx client; gRPC needs them as metadata on each call.
        parameters = {k.lower(): v for k, v in self.headers.items()} if choice.binding == "GRPC" else None
        trace = self._session.trace
        if parameters is not None and trace is not None:
            parameters.setdefault("traceparent", trace.traceparent)
        return ClientCallContext(service_parameters=parameters, timeout=timeout)

    async def aclose(self) -> None:
        for channel in self._channels:
            with contextlib.suppress(Exception):
                await channel.close(grace=None)
        self._channels.clear()
        for relay in self._relays:
            await relay.close()
        self._relays.clear()
        await self.http.aclose()

    # -- calls ----------------------------------------------------------------------------------------

    async def call(self, url: str, attempt: Callable[[], Awaitable[T]], *, counted: bool = True) -> T:
        """One call, retried while it does not reach the agent (then InfraError); errors it answered raise.
        `counted=False` keeps it out of `requests` (reading the card)."""
        for number in range(1, self._connect.attempts + 1):
            try:
                result = await attempt()
            except Exception as exc:
                await self._failed(exc, number, url, counted=counted)
                continue
            self.unreachable = None
            self.requests += counted
            return result
        raise AssertionError("unreachable: connect.attempts is at least 1")

    async def stream(self, url: str, opener: Callable[[], AsyncIterator[StreamResponse]]
                     ) -> AsyncIterator[StreamResponse]:
        """A streamed call: retried like `call` until its first event arrives, then read as it comes."""
        for number in range(1, self._connect.attempts + 1):
            async with contextlib.aclosing(opener()) as events:  # type: ignore[type-var]  # an async generator: it has aclose
                try:
                    first = await anext(aiter(events))
                except StopAsyncIteration:
                    self.unreachable = None
                    self.requests += 1
                    return
                except Exception as exc:
                    await self._failed(exc, number, url)
                    continue
                self.unreachable = None
                self.requests += 1
                yield first
                async for event in events:
                    yield event
                return

    async def _failed(self, exc: Exception, number: int, url: str, *, counted: bool = True) -> None:
        """Count an error the agent answered and raise it; retry (return) or give up on one that never got
        there."""
        reason = unreachable(exc)
        relayed = next((r.failure for r in self._relays if r.failure), None)
        if reason is not None and relayed is not None:  # what the relay met is why: gRPC saw its socket close
            reason = relayed
            for relay in self._relays:
                relay.failure = None
        if reason is None:
            self.unreachable = None
            self.requests += counted
            raise exc
        self.unreachable = reason
        masked = shown_url(url, self._session.redactor.text, query=True)
        if speaks_http1(reason):  # reached, but no gRPC server: asking again changes nothing
            raise InfraError(f"{self._what}: {masked} answered in HTTP/1.x, not gRPC (HTTP/2): is `transport: "
                             "grpc` right, or the port the agent's gRPC server listens on?") from exc
        if number >= self._connect.attempts:
            tries = f"{number} attempt{'s' if number != 1 else ''}"
            named = f", {self.card_named[url]}," if url in self.card_named else ""
            raise InfraError(f"{self._what}: cannot reach {masked}{named} after {tries}: {reason}") from exc
        self._session.event("connect_retry", attempt=number, attempts=self._connect.attempts, reason=reason,
                            url=masked)
        await asyncio.sleep(self._connect.backoff)
