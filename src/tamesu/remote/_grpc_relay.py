"""`forward: grpc://...`: the recording proxy on gRPC, for a real agent the orchestrator reaches over gRPC.

As the HTTP proxy (`forward`), it relays, it does not re-issue: every call of either A2A service (1.0
`lf.a2a.v1.A2AService`, 0.3 `a2a.v1.A2AService`) goes on to the real agent under the same method with the
request's bytes, and the answer's bytes, status and metadata come back as they are. The proxy decodes a copy
only to record the delegation. The changes are the HTTP proxy's: a card's gRPC interface at the real agent is
moved to the proxy (others dropped), `headers` are added as metadata, the caller's `authorization` is not passed
on when the proxy has its own `token`, and a push config's URL points at the proxy (`_push_relay`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.types import a2a_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from tamesu.conversation import Session
from tamesu.net.grpc_channels import dial_target, tls_words
from tamesu.net.urls import shown_url
from tamesu.remote._push_relay import PushRelay
from tamesu.remote._wire import Call, Reply, rewrite_card
from tamesu.remote.executor import Delegation, Fuzzed

READ_TIMEOUT = 300.0
"""A unary call's bound, and between two messages of a stream: the real agent may work a while."""
_NOT_RELAYED = frozenset({"user-agent", "te", "content-type", "grpc-accept-encoding", "grpc-encoding",
                          "grpc-timeout"})
_SERVICES = {"lf.a2a.v1.A2AService": ("1.0", a2a_pb2), "a2a.v1.A2AService": ("0.3", a2a_v0_3_pb2)}
_CARDS = frozenset({"GetExtendedAgentCard", "GetAgentCard"})


class Method:
    """One method of an A2A service, with its message classes (to read a copy of what passes)."""

    def __init__(self, path: str, version: str, name: str, streaming: bool, request: type[Message],
                 response: type[Message]) -> None:
        self.path, self.version, self.name, self.streaming = path, version, name, streaming
        self.request, self.response = request, response


def _methods() -> dict[str, Method]:
    found: dict[str, Method] = {}
    for service, (version, module) in _SERVICES.items():
        for method in module.DESCRIPTOR.services_by_name[service.rsplit(".", 1)[1]].methods:
            path = f"/{service}/{method.name}"
            found[path] = Method(path, version, method.name, method.server_streaming,
                                 GetMessageClass(method.input_type), GetMessageClass(method.output_type))
    return found


METHODS = _methods()

Record = Callable[[Call, Delegation | None, Reply], None]


class GrpcRelay(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no types
    """The proxy's gRPC handlers: every A2A method relayed over `channel` to the real agent at `real_url`."""

    def __init__(self, name: str, channel: grpc.aio.Channel, real_url: str, session: Session,
                 delegation: Callable[[Call], Delegation], finish: Callable[[Delegation, Reply], None],
                 unreachable: Callable[[Call, Delegation | None, str], None], push: PushRelay,
                 fuzzed: Fuzzed,
                 *, headers: dict[str, str], keep_authorization: bool, hold: float | None,
                 closed_hint: str = "") -> None:
        self.name = name
        self.proxy_addr = ""
        """Set once the proxy's gRPC port is bound: a card's gRPC interface is moved there."""
        self._channel = channel
        self._url = real_url
        self._real = dial_target(real_url)[0]
        self._session = session
        self._delegation = delegation
        self._finish = finish
        self._unreachable = unreachable
        self._push = push
        self._fuzzed = fuzzed
        self._closed_hint = closed_hint
        """Said after a connection the real agent closed: with TLS and no client certificate, the likely why."""
        self._headers = {k.lower(): v for k, v in headers.items()}
        self._keep_authorization = keep_authorization
        self._hold = hold

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = METHODS.get(handler_call_details.method or "")
        if method is None:
            return None  # UNIMPLEMENTED, as the real agent would say of a method of no A2A service
        if method.streaming:
            return grpc.unary_stream_rpc_method_handler(self._streaming(method))
        return grpc.unary_unary_rpc_method_handler(self._unary(method))

    def _unary(self, method: Method) -> Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]:
        async def relay(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            call, delegation, request = await self._begin(method, request)
            remote = self._channel.unary_unary(method.path)
            try:
                answer = await remote(request, metadata=self._outgoing(context), timeout=_bound(context))
            except grpc.aio.AioRpcError as exc:
                await self._failed(context, call, delegation, exc, Reply())
                return b""  # not reached: `abort` raises
            reply = Reply()
            payload = _read(method.response, answer)
            if delegation is not None:
                reply.feed(payload)
                self._finish(delegation, reply)
            self._event(call, "OK")
            return self._answer(method, answer, payload)

        return relay

    def _streaming(self, method: Method) -> Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]:
        async def relay(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            call, delegation, request = await self._begin(method, request)
            remote = self._channel.unary_stream(method.path)(request, metadata=self._outgoing(context),
                                                              timeout=context.time_remaining())
            reply = Reply()
            recorded = False
            try:
                stream = remote.__aiter__()
                while True:
                    try:
                        answer = await asyncio.wait_for(anext(stream), READ_TIMEOUT)
                    except StopAsyncIteration:
                        break
                    if delegation is not None:
                        reply.feed(_read(method.response, answer))
                        if reply.settled and not recorded:
                            recorded = True
                            self._finish(delegation, reply)
                    yield answer
            except grpc.aio.AioRpcError as exc:
                recorded = True
                await self._failed(context, call, delegation, exc, reply)
            except TimeoutError:
                recorded = True
                said = f"the real agent sent nothing for {READ_TIMEOUT:g}s"
                self._event(call, "DEADLINE_EXCEEDED")
                if delegation is not None:
                    reply.error, reply.state = said, "error"
                    self._finish(delegation, reply)
                await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, said)
            finally:
                remote.cancel()  # the caller left, or the stream ended: nothing more to read
                if delegation is not None and not recorded:
                    self._finish(delegation, reply)
            self._event(call, "OK")

        return relay

    async def _begin(self, method: Method, request: bytes) -> tuple[Call, Delegation | None, bytes]:
        payload = _read(method.request, request)
        message = payload.get("message") or payload.get("request") if method.name in (
            "SendMessage", "SendStreamingMessage") else None
        call = Call(binding="grpc", version=method.version, method=method.name,
                    message=message if isinstance(message, dict) else None, card=method.name in _CARDS)
        delegation = self._delegation(call) if call.message is not None else None
        if delegation is not None and self._hold is not None:
            self._fuzzed(delegation, "delay")
            await asyncio.sleep(self._hold)
        rewritten = self._push.outgoing(payload, method.name)
        if rewritten is not None:
            request = ParseDict(rewritten, method.request()).SerializeToString()
        return call, delegation, request

    def _answer(self, method: Method, answer: bytes, payload: dict[str, Any]) -> bytes:
        """The answer as the real agent gave it, but a card pointing at the proxy and push URLs as set."""
        changed: object = None
        if method.name in _CARDS:
            changed = rewrite_card(payload, "", "", grpc=(self._real, self.proxy_addr))
        elif "PushNotificationConfig" in method.name:
            changed = self._push.incoming(payload)
        if not isinstance(changed, dict) or changed == payload:
            return answer
        return ParseDict(changed, method.response()).SerializeToString()

    def _outgoing(self, context: grpc.aio.ServicerContext) -> list[tuple[str, str | bytes]]:
        metadata = [(k, v) for k, v in (context.invocation_metadata() or ())
                    if not k.startswith(":") and k not in _NOT_RELAYED and k not in self._headers
                    and (self._keep_authorization or k != "authorization")]
        return [*metadata, *self._headers.items()]

    async def _failed(self, context: grpc.aio.ServicerContext, call: Call, delegation: Delegation | None,
                      exc: grpc.aio.AioRpcError, reply: Reply) -> None:
        if exc.code() == grpc.StatusCode.UNAVAILABLE:  # no connection to the real agent
            details = exc.details() or ""
            # gRPC's core says every layer ("failed to connect to all addresses; last error: UNKNOWN: ipv4:...:
            # Failed to connect to remote host: Connection refused"): the last is the why
            last = details.rsplit(": ", 1)[-1] if details.startswith("failed to connect to all") else details
            reason = tls_words(details) or f"UNAVAILABLE: {last}"
            if self._closed_hint and ("socket closed" in details.lower() or "reset" in details.lower()):
                reason += self._closed_hint
            reason = f"the real agent did not answer: {reason}"
            self._unreachable(call, delegation, reason)
            # the caller is told what broke in the line the run ends with: its UNAVAILABLE would otherwise read
            # as a proxy it could not reach (the a2a target's "cannot reach <proxy>")
            said = f"remote agent {self.name}: forward to {shown_url(self._url, query=True)}: {reason}"
            await context.abort(grpc.StatusCode.UNAVAILABLE, self._session.redactor.text(said))
        else:
            self._event(call, exc.code().name)
            if delegation is not None:
                reply.error, reply.state = f"{exc.code().name}: {exc.details()}", "error"
                self._finish(delegation, reply)
        trailing = tuple((k, v) for k, v in (exc.trailing_metadata() or ()) if not k.startswith("grpc-"))
        await context.abort(exc.code(), exc.details() or "", trailing)

    def _event(self, call: Call, status: str) -> None:
        self._session.event("forwarded", agent=self.name, method=call.method, status=status, binding="grpc",
                            version=call.version)


def _bound(context: grpc.aio.ServicerContext) -> float:
    remaining = context.time_remaining()
    return READ_TIMEOUT if remaining is None else min(remaining, READ_TIMEOUT)


def _read(kind: type[Message], raw: bytes) -> dict[str, Any]:
    """A copy of a message as proto-JSON, or {} for bytes that are not one (recorded as nothing, relayed as is)."""
    try:
        return MessageToDict(kind.FromString(raw))
    except DecodeError:
        return {}
