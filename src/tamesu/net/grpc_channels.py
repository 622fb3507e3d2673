"""gRPC channels as every target that dials one makes them (the grpc target, a2a over gRPC): the url read
(`grpc://` plaintext, `grpcs://` TLS), the channel's trust (`tamesu.net.tls`: the platform's store, `ca_file`, a
client certificate; `tls.verify: false` through `unverified_grpc`'s relay), a channel made ready within a bound,
and what `tamesu doctor` says of a gRPC agent."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import grpc

from tamesu.net.proxies import grpc_direct_options, proxy_for
from tamesu.net.tls import TlsError, TlsSpec, readable, trusted_pem
from tamesu.net.unverified_grpc import UncheckedRelay, unchecked_context

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


Option = tuple[str, str | int]


def grpc_channel(target: str, tls: bool, spec: TlsSpec | None, *, timeout: float,
                 options: Sequence[Option] = ()) -> tuple[grpc.aio.Channel, UncheckedRelay | None]:
    """A channel to `host:port` as every target dials one (in a running loop), with `options` besides: plaintext,
    or TLS trusting what `credentials` trusts (`server_name`: the name the certificate must carry), the
    environment's proxy kept off where `grpc_direct_options` says; for `tls.verify: false`, plaintext to an
    `UncheckedRelay` (its connections to the agent bounded by `timeout`), which the caller closes after the
    channel. Unreadable files, or a proxy the environment names for a host the relay would reach directly:
    TlsError."""
    if tls and spec is not None and not spec.verify:
        host = target.rpartition(":")[0].strip("[]")
        if proxy_for("https", host) is not None:
            raise TlsError(f"tls.verify: false over gRPC connects to {target} directly, and the environment names a "
                           "proxy for it: give the agent's CA as tls.ca_file instead, or add the host to NO_PROXY")
        relay = UncheckedRelay(target, unchecked_context(spec), spec.server_name, timeout)
        # the agent sees the authority it was dialled by (a unix: target's would be `localhost`), and the relay is
        # never proxied
        relayed = [*options, ("grpc.default_authority", target), ("grpc.enable_http_proxy", 0)]
        return grpc.aio.insecure_channel(relay.address, options=relayed), relay
    direct = [*options, *grpc_direct_options(target)]
    if not tls:
        return grpc.aio.insecure_channel(target, options=direct), None
    if spec is not None and spec.server_name:
        direct.append(("grpc.ssl_target_name_override", spec.server_name))
    return grpc.aio.secure_channel(target, credentials(spec), options=direct), None


def tls_words(details: str) -> str | None:
    """A failed call's `details` as `tls_reason` words when a TLS handshake failed (gRPC's core says it in
    OpenSSL's words, in a line that runs through every layer), else None."""
    said = details.lower()
    if "handshake failed" not in said and "certificate_verify_failed" not in said and \
            "verification check failed" not in said:
        return None
    if "peer name" in said or "hostname" in said or "ip address mismatch" in said:
        return "TLS: the certificate is for another host (tls.server_name: the name it carries)"
    if "expired" in said:
        return "TLS: the certificate has expired"
    if "certificate_verify_failed" in said:
        return "TLS: the certificate's CA is not trusted (give it with tls.ca_file or SSL_CERT_FILE)"
    last = details.removesuffix(": OK").rsplit(": ", 1)[-1].strip()
    return (f"TLS handshake failed ({last}): if the server requires a client certificate, give it as tls.cert_file "
            "and tls.key_file")


async def ready(channel: grpc.aio.Channel, timeout: float) -> str:
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
    `timeout` (TCP, TLS for grpcs:// (through the relay a run takes for `tls.verify: false`), the HTTP/2
    handshake: a port that answers HTTP/1 only is no gRPC server),
    then the standard health service (grpc.health.v1 `Check`, the whole server) when the agent offers it.
    (fine, the line). The messages are read as bytes: an empty request, a status in field 1."""
    target, tls = dial_target(url)
    try:
        channel, relay = grpc_channel(target, tls, tls_spec, timeout=timeout)
    except TlsError as exc:
        return False, str(exc)
    layers = ("TCP, HTTP/2" if not tls else "TCP, TLS, HTTP/2" if relay is None
              else "TCP, TLS with the certificate not checked, HTTP/2")
    try:
        if reason := await ready(channel, timeout):
            why = relay.failure if relay is not None and relay.failure else reason  # what the relay met is why
            return False, f"no gRPC channel ({layers}): {why}"
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
        if relay is not None:
            await relay.close()
