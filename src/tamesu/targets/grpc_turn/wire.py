"""The grpc target's wire: dialing with `connect` retries, call metadata, a user turn as a `UserTurn`, and a
gRPC status as the failure tamesu tells apart (unreachable or credentials refused: InfraError; anything else: the
turn's TurnError)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict

from tamesu._proto.turn.v1 import turn_pb2
from tamesu.conversation import Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.net.grpc_channels import dial_target, grpc_channel, ready
from tamesu.net.tls import TlsError, TlsSpec
from tamesu.net.unverified_grpc import UncheckedRelay
from tamesu.net.urls import REFUSAL_HINTS, shown_url
from tamesu.suite.schema import ConnectSpec


async def dial(url: str, connect: ConnectSpec, session: Session, what: str, max_receive: int | None = None,
               tls_spec: TlsSpec | None = None) -> tuple[grpc.aio.Channel, UncheckedRelay | None]:
    """A channel that is READY, or InfraError after `connect.attempts` tries `connect.backoff` apart, each
    waiting at most `connect.timeout` (a refused connection fails its try at once). Each try is a fresh
    channel, so gRPC's own reconnect backoff never stretches tamesu's. `max_receive`: the largest message
    the channel takes (a larger one ends the call RESOURCE_EXHAUSTED, see `too_large`); `tls_spec`: a grpcs://
    channel's `tls:` block (`grpc_channel`: its trust, `server_name`; `verify: false` through a relay on
    a private Unix socket, returned beside the channel for the caller to close after it)."""
    target, tls = dial_target(url)
    shown = shown_url(url, session.redactor.text)  # never a user:password@ written in it, a secret or not
    reason = ""
    options = [("grpc.max_receive_message_length", max_receive)] if max_receive is not None else []
    for attempt in range(1, connect.attempts + 1):
        try:
            channel, relay = grpc_channel(target, tls, tls_spec, timeout=connect.timeout, options=options)
        except TlsError as exc:  # a file of the tls: block: said with the target it belongs to
            raise TlsError(f"{what}: {exc}") from None
        try:
            reason = await ready(channel, connect.timeout)
        except BaseException:  # cancelled while waiting (a test's timeout): the relay's listener ends here too
            await channel.close()
            if relay is not None:
                await relay.close()
            raise
        if not reason:
            return channel, relay
        await channel.close()
        if relay is not None:
            await relay.close()
            reason = relay.failure or reason  # what the relay met is why: gRPC saw its socket close
        if attempt < connect.attempts:
            session.event("connect_retry", attempt=attempt, reason=reason, url=shown)
            await asyncio.sleep(connect.backoff)
    # gRPC does not say why a TLS handshake failed: the line names what to check instead
    check = (" (if it serves TLS, check its CA (tls.ca_file or SSL_CERT_FILE), the name its certificate carries "
             "(tls.server_name) and a client certificate it may require (tls.cert_file, tls.key_file))"
             if tls and reason == "the connection failed" else "")
    raise InfraError(f"{what}: cannot reach the agent at {shown} after {connect.attempts} attempt(s): "
                     f"UNAVAILABLE ({reason}){check}")


def metadata(headers: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Headers as gRPC call metadata: keys lower-case, as gRPC requires."""
    return tuple((name.lower(), value) for name, value in headers.items())


def _json(value: object) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def user_turn(turn: UserTurn, *, session_id: str, index: int, base_dir: Path, what: str) -> turn_pb2.UserTurn:
    """The turn on the wire: words, data, files (bytes when it has a path, else its URI) and any history."""
    message = turn_pb2.UserTurn(session_id=session_id, turn=index, text=turn.text)
    if turn.data is not None:
        value = struct_pb2.Value()
        ParseDict(_json(turn.data), value)
        message.data.CopyFrom(value)
    for file in turn.files:
        sent = message.files.add(name=file.name, mime_type=file.mime)
        if file.path:
            path = base_dir / file.path
            try:
                sent.content = path.read_bytes()
            except OSError as exc:
                raise InfraError(f"{what}: cannot read the file {file.name} ({path}): {exc.strerror or exc}") from exc
        elif file.uri:
            sent.uri = file.uri
    for earlier in turn.history:
        message.history.add(role=earlier.role, content=earlier.content)
    return message


_TOO_LARGE = re.compile(r"larger than max \((\d+) vs\. (\d+)\)")


def too_large(exc: grpc.aio.AioRpcError, limit: int, sent: int) -> tuple[str, int, int] | None:
    """A message refused for its size (RESOURCE_EXHAUSTED, `larger than max (N vs. M)`): who refused it
    (`answer`: our channel, past `limit`, our max_response_bytes; `request`: the agent, our turn of `sent`
    bytes past its own max_receive_message_length), N and M; None for any other status. gRPC words both the
    same; its core prefixes the side (`SERVER:`, `CLIENT:`), and without that the limit and the size tell."""
    details = exc.details() or ""
    found = _TOO_LARGE.search(details)
    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or found is None:
        return None
    size, most = int(found.group(1)), int(found.group(2))
    if details.startswith("SERVER:"):
        return "request", size, most
    if details.startswith("CLIENT:"):
        return "answer", size, most
    return ("request" if most != limit or size == sent else "answer"), size, most


TURN_SERVICE = "tamesu.turn.v1.TurnService"


_REFUSED = {grpc.StatusCode.UNAUTHENTICATED: REFUSAL_HINTS[401], grpc.StatusCode.PERMISSION_DENIED: REFUSAL_HINTS[403]}
"""gRPC's 401 and 403: the call refused for its metadata (a token), before or instead of any answer."""


def status_failure(exc: grpc.aio.AioRpcError, what: str, index: int, limit: float, *, method: str,
                   deadline_passed: bool) -> Exception:
    """What a non-OK status means for the run: UNAVAILABLE is the agent gone and UNAUTHENTICATED or
    PERMISSION_DENIED the call's credentials refused (InfraError, exit 3); our own deadline (`deadline_passed`) is
    the turn timing out; any other status fails the turn with that status."""
    return code_failure(exc.code(), exc.details() or "", what, index, limit, method=method,
                        deadline_passed=deadline_passed)


def code_failure(code: grpc.StatusCode, details: str, what: str, index: int, limit: float, *, method: str,
                 deadline_passed: bool = False) -> Exception:
    """`method`: the turn API's method called (`Converse`, `SendTurn`); `deadline_passed`: the call's own
    deadline (turn_timeout) had passed, so a DEADLINE_EXCEEDED is ours, not the agent's status."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return InfraError(f"{what}: the agent became unreachable during turn {index}: UNAVAILABLE: {details}")
    if code in _REFUSED:
        # the credentials, not the conversation: the rest, a2a and mcp targets say a 401/403 alike (exit 3)
        return InfraError(f"{what}: the agent's server refused the call: gRPC status {code.name}"
                          f"{f' ({details})' if details else ''}: {_REFUSED[code]}")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        # a server that is not the turn API (a wrong port, another service): nothing the agent said
        return InfraError(f"{what}: the server does not implement {TURN_SERVICE}/{method} (UNIMPLEMENTED: "
                          f"{details}): is url the agent's turn API (docs/grpc.md), and `mode` the method it serves?")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline_passed:
        return TurnError(f"turn timed out after {limit:g}s (no reply)", raw={"code": code.name, "details": details},
                         status=code.value[0], limit_s=limit)
    return TurnError(f"the agent answered gRPC status {code.name}: {details}".rstrip(": "),
                     raw={"code": code.name, "details": details}, status=code.value[0])
