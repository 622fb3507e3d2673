"""The grpc target's wire: dialing with `connect` retries, call metadata, a user turn as a `UserTurn`, and a
gRPC status as the failure tamesu tells apart (unreachable or credentials refused: InfraError; anything else: the
turn's TurnError)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grpc
from google.protobuf import struct_pb2
from google.protobuf.json_format import ParseDict

from tamesu._proto.turn.v1 import turn_pb2
from tamesu.conversation import Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.net.proxies import grpc_direct_options
from tamesu.net.tls import TlsError, TlsSpec, readable, trusted_pem
from tamesu.net.urls import REFUSAL_HINTS
from tamesu.suite.schema import ConnectSpec

_READY = grpc.ChannelConnectivity.READY
_FAILED = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


PLAINTEXT_TLS = "grpc:// is plaintext: tls: is for a grpcs:// url"


def tls_on_plaintext(data: object) -> object:
    """A target's keys as written, before they are read: with a `tls:` block on a grpc:// url, the block is read as
    empty, so what is wrong is said at the url (`PLAINTEXT_TLS`) and not hidden behind what the block holds (its
    `verify: false` asked for a CA file a plaintext channel never uses)."""
    if isinstance(data, dict) and isinstance(data.get("url"), str) and data["url"].startswith("grpc://") \
            and data.get("tls") is not None:
        return {**data, "tls": {}}
    return data


def dial_target(url: str) -> tuple[str, bool]:
    """`grpc://host:port` -> (`host:port`, no TLS); `grpcs://host[:443]` -> (`host:443`, TLS)."""
    parts = urlsplit(url)
    if parts.scheme not in ("grpc", "grpcs") or not parts.hostname:
        raise ValueError(f"expected grpc://host:port or grpcs://host:port, got {url!r}")
    tls = parts.scheme == "grpcs"
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in {url!r}") from None
    if port is None and not tls:
        raise ValueError(f"grpc:// needs a port: {url!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port or 443}", tls


def credentials(spec: TlsSpec | None) -> grpc.ChannelCredentials:
    """A grpcs:// channel's trust as every other route's (`tamesu.net.tls`): the platform's store and
    `tls.ca_file`, and the client certificate of `tls.cert_file` + `key_file`. Unreadable files: TlsError."""
    spec = spec or TlsSpec()
    key = chain = None
    if spec.cert_file is not None and spec.key_file is not None:
        chain = Path(readable(spec.cert_file, "cert_file")).read_bytes()
        key = Path(readable(spec.key_file, "key_file")).read_bytes()
    return grpc.ssl_channel_credentials(root_certificates=trusted_pem(spec.ca_file), private_key=key,
                                        certificate_chain=chain)


async def dial(url: str, connect: ConnectSpec, session: Session, what: str,
               max_receive: int | None = None, tls_spec: TlsSpec | None = None) -> grpc.aio.Channel:
    """A channel that is READY, or InfraError after `connect.attempts` tries `connect.backoff` apart, each
    waiting at most `connect.timeout` (a refused connection fails its try at once). Each try is a fresh
    channel, so gRPC's own reconnect backoff never stretches tamesu's. `max_receive`: the largest message
    the channel takes (a larger one ends the call RESOURCE_EXHAUSTED, see `too_large`); `tls_spec`: a grpcs://
    channel's `tls:` block (`credentials`; `server_name`: the name its certificate must carry)."""
    target, tls = dial_target(url)
    shown = session.redactor.text(url)
    reason = ""
    options: list[tuple[str, str | int]] = [*grpc_direct_options(target)]
    if max_receive is not None:
        options.append(("grpc.max_receive_message_length", max_receive))
    try:
        secure = credentials(tls_spec) if tls else None
    except TlsError as exc:  # a file of the tls: block: said with the target it belongs to
        raise TlsError(f"{what}: {exc}") from None
    if secure is not None and tls_spec is not None and tls_spec.server_name:
        options.append(("grpc.ssl_target_name_override", tls_spec.server_name))
    for attempt in range(1, connect.attempts + 1):
        channel = (grpc.aio.secure_channel(target, secure, options=options) if secure is not None
                   else grpc.aio.insecure_channel(target, options=options))
        reason = await _ready(channel, connect.timeout)
        if not reason:
            return channel
        await channel.close()
        if attempt < connect.attempts:
            session.event("connect_retry", attempt=attempt, reason=reason, url=shown)
            await asyncio.sleep(connect.backoff)
    # gRPC does not say why a TLS handshake failed: the line names what to check instead
    check = (" (if it serves TLS, check its CA (tls.ca_file or SSL_CERT_FILE), the name its certificate carries "
             "(tls.server_name) and a client certificate it may require (tls.cert_file, tls.key_file))"
             if secure is not None and reason == "the connection failed" else "")
    raise InfraError(f"{what}: cannot reach the agent at {shown} after {connect.attempts} attempt(s): "
                     f"UNAVAILABLE ({reason}){check}")


async def _ready(channel: grpc.aio.Channel, timeout: float) -> str:
    """"" when the channel is ready, else why not."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    state = channel.get_state(try_to_connect=True)
    while state != _READY:
        if state in _FAILED:
            return "the connection failed"
        remaining = deadline - loop.time()
        if remaining <= 0:
            return f"not connected within {timeout:g}s"
        try:
            await asyncio.wait_for(channel.wait_for_state_change(state), remaining)
        except TimeoutError:
            return f"not connected within {timeout:g}s"
        state = channel.get_state(try_to_connect=True)
    return ""


_HEALTH = ("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")
"""grpc.health.v1's HealthCheckResponse.ServingStatus, by number."""


async def probe(url: str, tls_spec: TlsSpec | None, timeout: float = 2.0) -> tuple[bool, str]:
    """What `tamesu doctor` says of a gRPC agent (the grpc target, a2a over gRPC): a channel made ready within
    `timeout` (TCP, TLS for grpcs://, the HTTP/2 handshake: a port that answers HTTP/1 only is no gRPC server),
    then the standard health service (grpc.health.v1 `Check`, the whole server) when the agent offers it.
    (fine, the line). The messages are read as bytes: an empty request, a status in field 1."""
    target, tls = dial_target(url)
    options: list[tuple[str, str | int]] = [*grpc_direct_options(target)]
    try:
        secure = credentials(tls_spec) if tls else None
    except TlsError as exc:
        return False, str(exc)
    if secure is not None and tls_spec is not None and tls_spec.server_name:
        options.append(("grpc.ssl_target_name_override", tls_spec.server_name))
    channel = (grpc.aio.secure_channel(target, secure, options=options) if secure is not None
               else grpc.aio.insecure_channel(target, options=options))
    layers = "TCP, TLS, HTTP/2" if tls else "TCP, HTTP/2"
    try:
        if reason := await _ready(channel, timeout):
            return False, f"no gRPC channel ({layers}): {reason}"
        try:
            answer = await channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return True, f"gRPC channel ready ({layers}); it offers no health service (grpc.health.v1)"
            return False, f"gRPC channel ready ({layers}); its health check answered {exc.code().name}: " \
                          f"{exc.details()}"
        number = answer[1] if isinstance(answer, bytes) and answer[:1] == b"\x08" and len(answer) > 1 else 0
        status = _HEALTH[number] if number < len(_HEALTH) else str(number)
        return status == "SERVING", f"gRPC channel ready ({layers}); health (grpc.health.v1): {status}"
    finally:
        await channel.close()


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
