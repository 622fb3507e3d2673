"""Which proxy a connection goes through: the environment's (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, less what
`NO_PROXY` names), never for this machine's own addresses. An agent, a model server or a remote agent on
127.0.0.1 is reached directly even where a company's `HTTPS_PROXY` is set for everything, as Go's net/http does
(tamesu's Go original): a proxy elsewhere cannot reach this machine's loopback, so the local agents a test starts
failed as `Connection refused`, or met the proxy's error page, in every such environment. Every route reads it
here: the HTTP clients (`tamesu.net.aio`, `tamesu.net.direct`), the websockets (voice, realtime, the rest
target's websocket streaming) and the gRPC channels."""

from __future__ import annotations

import functools
import urllib.parse
import urllib.request
from typing import Literal

from tamesu.types import is_loopback  # this machine: never through a proxy


@functools.cache
def environment_proxies() -> dict[str, str]:
    """The proxies the environment names (scheme: URL, `no`: the NO_PROXY list), read once: tamesu does not change
    its own environment while it runs, and reading it costs 0.3 ms."""
    return urllib.request.getproxies_environment()


@functools.cache
def proxy_for(scheme: str, host: str) -> str | None:
    """The proxy a request to `host` over `scheme` goes through, or None (direct: a loopback host, NO_PROXY names
    the host, or no proxy is set)."""
    proxies = environment_proxies()
    url = proxies.get(scheme) or proxies.get("all")
    if url is None or bypassed(host):
        return None
    return url if "://" in url else f"http://{url}"


def bypassed(host: str) -> bool:
    """Whether a connection to `host` goes around every proxy: a loopback host, or one NO_PROXY names. For the
    clients that read the environment themselves (websockets, gRPC), told to go direct for these."""
    return is_loopback(host) or _bypassed(host, environment_proxies().get("no", ""))


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY names `host`: `*`, the host itself, or a domain it is in (`example.com` and
    `.example.com` both cover `api.example.com`), as curl and the requests library read it."""
    host = host.lower().strip("[]")
    for entry in no_proxy.split(","):
        name = entry.strip().lower().lstrip(".")
        if name.startswith("[") or name.count(":") == 1:
            name = name.rsplit(":", 1)[0].strip("[]")  # a port is not matched apart
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


def grpc_direct_options(target: str) -> list[tuple[str, int]]:
    """The channel options that keep gRPC (which reads `grpc_proxy`, `https_proxy` and `http_proxy` itself) off
    the environment's proxy for a target `bypassed` names (`host:port`, `[::1]:port`, `dns:///host:port`);
    a `unix:` socket is never proxied."""
    address = target.split("///", 1)[-1] if target.startswith("dns:") else target
    if address.startswith("unix:"):
        return []
    host = address[1:].split("]", 1)[0] if address.startswith("[") else address.rsplit(":", 1)[0]
    return [("grpc.enable_http_proxy", 0)] if bypassed(host) else []


def websocket_proxy(url: str) -> Literal[True] | None:
    """`proxy=` for the websockets library's `connect`: None (direct) for a host `bypassed` names, else True
    (the library reads the environment's proxies itself)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    return None if bypassed(host) else True
