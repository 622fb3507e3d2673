"""`forward:`: a remote agent that is a recording proxy in front of a real A2A agent.

Forwarding is done at the HTTP level, not by re-issuing A2A calls: every request (JSON-RPC, HTTP+JSON, the card)
goes on to the same path at the real agent's origin with its body as is, and the answer comes back with its
status and body unchanged; an event stream is relayed chunk by chunk as it arrives. So whatever version, method
or extension the two agents speak passes through, and the proxy only *reads* the traffic (`_wire`) to record
each message as a delegation, in both directions. Three things are changed, on purpose:
- cards: interfaces at the real agent's origin are moved to the proxy, others (gRPC) dropped, so the agent under
  test keeps talking through the proxy after reading the card; a card asked under the remote agent's URL (which
  carries the forwarded URL's path) that the real agent does not serve there is fetched from its origin;
- headers: `headers` are added (the real agent's credentials), hop-by-hop ones are not relayed, and with `token`
  the caller's `Authorization` (meant for the proxy) is not passed on;
- push configs: their URL points at the proxy, which relays the real agent's notifications (`_push_relay`).
A request that went out on a kept-alive connection the real agent had just closed is sent again once on a new
one (`tamesu.net.aio`), said as a `resent` event naming the agent. A `grpc(s)://` forward is relayed on gRPC
(`_grpc_relay`), and this app then only says so. With `fuzz_tools`
naming the agent, everything but the card is answered locally by the scripted executor (`local`), and the card
too when the real agent cannot be reached; `delay` holds the request, then forwards it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tamesu.conversation import Session
from tamesu.net.clients import AsyncClient, client_options, os_reason
from tamesu.net.tls import TlsSpec
from tamesu.net.urls import shown_url
from tamesu.remote._push_relay import PushRelay
from tamesu.remote._wire import Call, Reply, SseReader, parts_of, read_call, rewrite_card
from tamesu.remote.executor import Delegation, Fuzzed

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 300.0
"""Between two chunks of an answer: a stream may sit idle while the real agent works."""
_NOT_RELAYED = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                          "accept-encoding", "content-encoding", "te", "trailer", "upgrade", "proxy-authorization",
                          "proxy-connection"})


class Forwarding(BaseModel):
    """The rendered `forward` and `headers` of one remote agent."""

    url: str
    headers: dict[str, str] = {}
    tls: TlsSpec | None = None
    """Trust and a client certificate for the connection to the real agent."""

    @property
    def shown(self) -> str:
        """The URL as an event, a delegation or an error names it: never a `user:password@` written in it (a
        credential whether or not the suite declares it a secret); its query kept, as a target's `transport` has it."""
        return shown_url(self.url, query=True)

    @property
    def grpc(self) -> bool:
        """The real agent is reached over gRPC (`grpc://`, `grpcs://`): the proxy relays gRPC, not HTTP."""
        return self.url.lower().startswith(("grpc://", "grpcs://"))

    @property
    def origin(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")


class ForwardProxy:
    """The ASGI app of a forwarding remote agent. `proxy_origin` is set once the socket is bound."""

    def __init__(self, name: str, forwarding: Forwarding, session: Session, record: Callable[[Delegation], None],
                 fuzzed: Fuzzed, *, local: ASGIApp | None = None, hold: float | None = None,
                 keep_authorization: bool = True) -> None:
        self.name = name
        self.forwarding = forwarding
        self.proxy_origin = ""
        self._session = session
        self._record = record
        self._fuzzed = fuzzed
        self._local = local
        self._hold = hold
        self._keep_authorization = keep_authorization
        self.push = PushRelay(name, session)
        """Push configs pointed at the proxy, the real agent's notifications relayed to the orchestrator."""
        self._recorded: set[int] = set()
        """Each delegation once (by identity; the group keeps them alive): a stream's is recorded as soon as it
        settles, or when it ends or is dropped."""
        # one client for the agent's life, its connections kept alive between calls: a call that went out on
        # one the real agent had just closed (its keep-alive time ran out between two delegations) is sent again
        self._client = AsyncClient(**client_options(tls=forwarding.tls, on_resend=self._resent),
                                         timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT))

    async def aclose(self) -> None:
        await self._client.aclose()
        await self.push.aclose()

    def _resent(self, request: httpx.Request, reason: str) -> None:
        self._session.event("resent", agent=self.name, reason=reason,
                            url=shown_url(str(request.url), self._session.redactor.text, query=True))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        if self.forwarding.grpc:
            await _json_answer(send, 404, {"error": {"code": 404, "status": "NOT_FOUND", "message": (
                f"remote agent {self.name} forwards gRPC ({self.forwarding.shown}): call it over gRPC, at "
                "{{remote." + self.name + ".grpc}}; it relays no HTTP")}})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        call = read_call(scope["method"], scope["path"], body, headers.get("a2a-version"))
        if self._local is not None and not call.card:
            await self._local(scope, _replay(body), send)  # the scripted executor answers and records
            return
        delegation = self.delegation(call) if call.message is not None else None
        if delegation is not None and self._hold is not None:
            self._fuzzed(delegation, "delay")
            await asyncio.sleep(self._hold)
        body = self.push.outgoing_body(body, call.method)
        query = scope.get("query_string", b"").decode("latin-1")
        url = self.forwarding.origin + scope["path"] + (f"?{query}" if query else "")
        request = self._client.build_request(scope["method"], url, content=body, headers=self._outgoing(headers))
        try:
            response = await self._client.send(request, stream=True)
            if call.card and response.status_code == 404 and (at_origin := self._card_at_origin(scope["path"])):
                # the card is read under the remote agent's URL (`{{remote.NAME.url}}/.well-known/...`), which
                # has the forwarded URL's path; a real agent that serves its card at its origin is asked there
                await response.aclose()
                request = self._client.build_request("GET", self.forwarding.origin + at_origin,
                                                     headers=self._outgoing(headers))
                response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            if self._local is not None:  # fuzzed, and the real agent is down too: the local card stands in
                await self._local(scope, _replay(body), send)
                return
            await self._unreachable(send, call, delegation, exc)
            return
        try:
            await self._relay(response, send, receive, call, delegation)
        finally:
            await response.aclose()

    def _card_at_origin(self, path: str) -> str | None:
        """The origin's own card path for a card asked under the forwarded URL's path, else None."""
        prefix = self.forwarding.path
        if not prefix or not path.startswith(prefix + "/.well-known/"):
            return None
        return path[len(prefix):]

    def _outgoing(self, incoming: dict[str, str]) -> dict[str, str]:
        headers = {k: v for k, v in incoming.items() if k not in _NOT_RELAYED}
        if not self._keep_authorization:
            headers.pop("authorization", None)
        headers.update({k.lower(): v for k, v in self.forwarding.headers.items()})
        # identity: the bytes relayed are the bytes read, so the recording can parse them
        headers["accept-encoding"] = "identity"
        return headers

    def delegation(self, call: Call) -> Delegation:
        message = call.message or {}
        texts, data = parts_of(message.get("parts") or message.get("content"))
        return Delegation(agent=self.name, message=" ".join(texts), data=data, binding=call.binding,
                          version=call.version, task_id=str(message.get("taskId") or ""),
                          context_id=str(message.get("contextId") or ""), at_ms=self._session.now_ms(),
                          forwarded=self.forwarding.shown, fuzzed="delay" if self._hold is not None else None)

    async def _relay(self, response: httpx.Response, send: Send, receive: Receive, call: Call,
                     delegation: Delegation | None) -> None:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()
                   if k.lower() not in _NOT_RELAYED]
        reply = Reply()
        self._session.event("forwarded", agent=self.name, method=call.method, status=response.status_code,
                            binding=call.binding, version=call.version)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
            relaying = asyncio.create_task(self._relay_stream(response, send, reply, delegation))
            # the caller may hang up mid-stream (it has what it wanted): then stop reading the real agent too
            hung_up = asyncio.create_task(_disconnected(receive))
            try:
                await asyncio.wait({relaying, hung_up}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                hung_up.cancel()
                if not relaying.done():
                    relaying.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await relaying
                    if delegation is not None and id(delegation) not in self._recorded:
                        self.finish(delegation, reply)
            if relaying.done() and not relaying.cancelled():
                relaying.result()
            return
        body = self.push.incoming_bytes(await response.aread())
        if call.card and response.status_code == 200:
            body = self._rewritten(body, call)
        if delegation is not None:
            reply.feed_body(body)
            if response.status_code >= 400 and reply.error is None:
                reply.error, reply.state = f"HTTP {response.status_code}", "error"
            self.finish(delegation, reply)
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _relay_stream(self, response: httpx.Response, send: Send, reply: Reply,
                            delegation: Delegation | None) -> None:
        reader = SseReader()
        async for chunk in response.aiter_raw():
            for event in reader.feed(chunk):
                reply.feed(event)
            if delegation is not None and reply.settled and id(delegation) not in self._recorded:
                self.finish(delegation, reply)  # recorded before the answer leaves, as the scripted agents do
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if delegation is not None and id(delegation) not in self._recorded:
            self.finish(delegation, reply)
        await send({"type": "http.response.body", "body": b""})

    def _rewritten(self, body: bytes, call: Call) -> bytes:
        try:
            parsed = json.loads(body)
        except ValueError:
            return body
        if call.binding == "jsonrpc" and isinstance(parsed, dict) and "result" in parsed:
            parsed = {**parsed, "result": rewrite_card(parsed["result"], self.forwarding.origin, self.proxy_origin)}
        else:
            parsed = rewrite_card(parsed, self.forwarding.origin, self.proxy_origin)
        return json.dumps(parsed).encode()

    def finish(self, delegation: Delegation, reply: Reply) -> None:
        self._recorded.add(id(delegation))
        delegation.reply, delegation.state = reply.text, reply.state or "unknown"
        delegation.reply_data = reply.data
        delegation.task_id = reply.task_id or delegation.task_id
        delegation.context_id = reply.context_id or delegation.context_id
        self._record(delegation)

    def unreachable(self, call: Call, delegation: Delegation | None, reason: str) -> None:
        """Said and recorded: the real agent could not be reached (the run is then an error, `group`)."""
        self._session.event("forward_failed", agent=self.name, url=self.forwarding.shown, method=call.method,
                            error=reason)
        if delegation is not None:
            delegation.reply, delegation.state = reason, "error"
            self._record(delegation)

    async def _unreachable(self, send: Send, call: Call, delegation: Delegation | None, exc: httpx.HTTPError) -> None:
        # the reason in a user's words (a TLS failure's, the system's), the URL naming the host beside it
        reason = f"the real agent did not answer: {type(exc).__name__}: {os_reason(exc)}"
        self.unreachable(call, delegation, reason)
        await _json_answer(send, 502, {"error": {"code": 502, "status": "UNAVAILABLE", "message": reason}})


async def _json_answer(send: Send, status: int, answer: object) -> None:
    body = json.dumps(answer).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A `receive` that gives the body already read, then waits like a connection kept open."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never set: the app is cancelled with the request
        return {"type": "http.disconnect"}

    return receive
