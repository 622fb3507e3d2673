"""One matrix every HTTP route of tamesu's runs through: each route's client, built the way the route builds it
(the rest target, a2a, mcp over streamable HTTP, the model providers' SDK client, hooks and the `http` check,
the remote agents' forward and push), against real servers on 127.0.0.1:

- HTTPS with a CA made here (trustme), trusted through SSL_CERT_FILE and through `tls.ca_file`; without it, one
  line naming the reason; a certificate for another host; an expired one; a server that requires a client
  certificate (mTLS);
- an HTTP CONNECT proxy started here: through it with HTTPS_PROXY, around it with NO_PROXY;
- an agent that answers 413 while the body is still being sent, then half-closes (the answer is read);
- an agent that resets the connection in the middle of the body (an error of the client's own kind).

The remote agents, the one route without a `tls:` block of its own, take the CA from the environment only. The
end-to-end tests (exit 3 and one line, from `tamesu run`; hooks' and the `http` check's `tls:`) are in
test_wire_cli.py."""

from __future__ import annotations

import datetime as dt
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import trustme

from ports import refused_port
from rest_client import RestClient
from sdk_groups import IN_PROCESS_MCP
from sessions import new_session
from tamesu.conversation import Session
from tamesu.net import aio, proxies, tls
from tamesu.net.clients import async_client, client_options, os_reason
from tamesu.net.tls import TlsSpec
from tamesu.suite.schema import ConnectSpec
from wire_servers import WORKED_S, ConnectProxy, echo_server, faulty_server

INTERNAL = "agent.internal.test"
"""A host only the test's proxy resolves (to 127.0.0.1)."""
VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")


def _session(tmp_path: Path) -> Session:
    return new_session(tmp_path)


def _rest(tmp_path: Path, spec: TlsSpec | None, resent: list[str]) -> Any:
    from tamesu.targets.rest.http import Http

    http = Http(session=_session(tmp_path), connect=ConnectSpec(), pool_timeout=10, what="rest target",
                max_bytes=10_000_000, tls=spec)
    return RestClient(http)


def _a2a(tmp_path: Path, spec: TlsSpec | None, resent: list[str]) -> Any:
    from tamesu.targets.a2a._wire import Wire

    return Wire(session=_session(tmp_path), connect=ConnectSpec(), turn_timeout=10, headers={}, what="a2a target",
                tls=spec).http


def _mcp(tmp_path: Path, spec: TlsSpec | None, resent: list[str]) -> Any:
    from tamesu.targets.mcp.connection import http_client

    return http_client({}, 5, max_bytes=10_000_000, resent=lambda request, reason: resent.append(reason), tls=spec)


def _model(tmp_path: Path, spec: TlsSpec | None, resent: list[str]) -> Any:
    from tamesu.models._sdk_http import sdk_http_client

    return sdk_http_client(spec)


def _hooks_and_checks(tmp_path: Path, spec: TlsSpec | None, resent: list[str]) -> Any:
    return async_client(10, tls=spec)


def _remote(tmp_path: Path, spec: TlsSpec | None, resent: list[str]) -> Any:
    # as remote/forward.py makes the forward's client (its `tls:` block); a push goes out on the same options
    # without one
    return httpx.AsyncClient(**client_options(tls=spec, on_resend=lambda request, reason: resent.append(reason)),
                             timeout=10)


ROUTES: dict[str, Callable[[Path, TlsSpec | None, list[str]], Any]] = {
    "rest": _rest, "a2a": _a2a, "mcp": _mcp, "model": _model, "hooks+http check": _hooks_and_checks,
    "remote forward+push": _remote,
}
WITH_TLS_BLOCK = ("rest", "a2a", "mcp", "model", "hooks+http check", "remote forward+push")
NO_RESEND = ("hooks+http check",)
"""Routes that never send a request again themselves (a hook's or a check's request is sent once)."""
ERRORS = (httpx.HTTPError, httpx2.HTTPError)


@pytest.fixture(params=[pytest.param(name, marks=IN_PROCESS_MCP) if name == "mcp" else name for name in ROUTES])
def route(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    _clear()
    yield monkeypatch
    _clear()  # the next test reads the environment as it really is


def _clear() -> None:
    # tls._context too: a block's context read SSL_CERT_FILE when it was made, and `ca` is made again when a
    # worker comes back to this module after another one's tests (it then trusted the CA of before)
    for cached in (proxies.environment_proxies, proxies.proxy_for, tls.platform_context, tls._context):
        cached.cache_clear()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _server_context(leaf: trustme.LeafCert, client_ca: trustme.CA | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(context)
    if client_ca is not None:
        client_ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def _post(route: str, tmp_path: Path, url: str, spec: TlsSpec | None = None, body: bytes = b'{"a": 1}',
                resent: list[str] | None = None, headers: dict[str, str] | None = None) -> Any:
    client = ROUTES[route](tmp_path, spec, resent if resent is not None else [])
    try:
        answer = await client.post(url, content=body, headers={"content-type": "application/json", **(headers or {})})
        await answer.aread()
        return answer
    finally:
        await client.aclose()


async def _failure(route: str, tmp_path: Path, url: str, spec: TlsSpec | None = None) -> str:
    with pytest.raises(ERRORS) as caught:
        await _post(route, tmp_path, url, spec)
    return os_reason(caught.value)


async def test_a_ca_in_ssl_cert_file_is_trusted(route: str, ca: trustme.CA, environment: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    environment.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with echo_server(_server_context(ca.issue_cert("127.0.0.1"))) as port:
        answer = await _post(route, tmp_path, f"https://127.0.0.1:{port}/chat")
    assert answer.status_code == 200 and answer.json()["text"] == "POST /chat HTTP/1.1"


async def test_a_ca_in_tls_ca_file_is_trusted(route: str, ca: trustme.CA, environment: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    if route not in WITH_TLS_BLOCK:
        pytest.skip(f"{route} has no tls: block of its own (the environment's store only)")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    async with echo_server(_server_context(ca.issue_cert("127.0.0.1"))) as port:
        trusted = TlsSpec(ca_file=str(tmp_path / "ca.pem"))
        answer = await _post(route, tmp_path, f"https://127.0.0.1:{port}/chat", trusted)
    assert answer.status_code == 200


async def test_without_the_ca_one_line_says_it_is_not_trusted(route: str, ca: trustme.CA,
                                                              environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    async with echo_server(_server_context(ca.issue_cert("127.0.0.1"))) as port:
        reason = await _failure(route, tmp_path, f"https://127.0.0.1:{port}/chat")
    assert reason.startswith("TLS: the certificate's CA is not trusted"), reason
    assert "\n" not in reason


async def test_a_certificate_for_another_host_is_refused(route: str, ca: trustme.CA, environment: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    environment.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    async with echo_server(_server_context(ca.issue_cert("agent.internal"))) as port:
        reason = await _failure(route, tmp_path, f"https://127.0.0.1:{port}/chat")
        assert reason.startswith("TLS: the certificate is for another host"), reason
        if route in WITH_TLS_BLOCK:  # the name it carries, given as tls.server_name, is accepted
            named = TlsSpec(server_name="agent.internal")
            assert (await _post(route, tmp_path, f"https://127.0.0.1:{port}/chat", named)).status_code == 200


async def test_an_expired_certificate_is_refused(route: str, ca: trustme.CA, environment: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    environment.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    leaf = ca.issue_cert("127.0.0.1", not_before=past - dt.timedelta(days=30), not_after=past)
    async with echo_server(_server_context(leaf)) as port:
        reason = await _failure(route, tmp_path, f"https://127.0.0.1:{port}/chat")
    assert reason.startswith("TLS: the certificate has expired"), reason


async def test_mtls_passes_with_a_client_certificate_and_fails_in_one_line_without(
        route: str, ca: trustme.CA, environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if route not in WITH_TLS_BLOCK:
        pytest.skip(f"{route} has no tls: block of its own (no client certificate to give)")
    clients = trustme.CA()
    client = clients.issue_cert("tamesu@example.com")
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    trust = TlsSpec(ca_file=str(tmp_path / "ca.pem"))
    mutual = TlsSpec(ca_file=str(tmp_path / "ca.pem"), cert_file=str(tmp_path / "client.pem"),
                     key_file=str(tmp_path / "client.key"))
    async with echo_server(_server_context(ca.issue_cert("127.0.0.1"), client_ca=clients)) as port:
        assert (await _post(route, tmp_path, f"https://127.0.0.1:{port}/chat", mutual)).status_code == 200
        with pytest.raises(ERRORS) as caught:
            await _post(route, tmp_path, f"https://127.0.0.1:{port}/chat", trust)
    reason = os_reason(caught.value)
    # TLS 1.3: the server checks the certificate after the handshake and resets; the line says what to give
    assert "tls.cert_file" in reason and "\n" not in reason, reason


async def test_https_proxy_tunnels_and_no_proxy_goes_around(route: str, ca: trustme.CA,
                                                            environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    environment.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    # a name only the proxy can resolve, as a company's proxy resolves its internal hosts (this machine's own
    # names never go through a proxy: below)
    proxy = ConnectProxy(hosts={INTERNAL: "127.0.0.1"})
    async with proxy.running() as proxy_url, echo_server(_server_context(ca.issue_cert(INTERNAL))) as port:
        environment.setenv("HTTPS_PROXY", proxy_url)
        assert (await _post(route, tmp_path, f"https://{INTERNAL}:{port}/via")).status_code == 200
        assert proxy.tunnels == [f"{INTERNAL}:{port}"]
        environment.setenv("NO_PROXY", f"example.com,.{INTERNAL.split('.', 1)[1]}")
        _clear()
        with pytest.raises(ERRORS) as caught:  # around the proxy: this machine cannot resolve the name
            await _post(route, tmp_path, f"https://{INTERNAL}:{port}/around")
        assert proxy.tunnels == [f"{INTERNAL}:{port}"], os_reason(caught.value)  # no second tunnel


async def test_this_machines_own_addresses_never_go_through_a_proxy(route: str, ca: trustme.CA,
                                                                    environment: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    environment.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    proxy = ConnectProxy()
    async with proxy.running() as proxy_url, \
            echo_server(_server_context(ca.issue_cert("localhost", "127.0.0.1", "::1"))) as port:
        # a proxy for everything, NO_PROXY naming none of them
        for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
            environment.setenv(name, proxy_url)
        _clear()
        for host in ("localhost", "127.0.0.1"):
            assert (await _post(route, tmp_path, f"https://{host}:{port}/direct")).status_code == 200
    assert proxy.tunnels == []


async def test_a_proxy_that_cannot_be_reached_is_named_and_is_a_connect_error(route: str,
                                                                             environment: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    port = refused_port()
    environment.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
    _clear()
    with pytest.raises(ERRORS) as caught:
        await _post(route, tmp_path, f"https://{INTERNAL}:443/chat")
    # a connect error: every route's "cannot reach" (exit 3), and the line blames the proxy, not the agent
    assert type(caught.value).__name__ == "ConnectError", repr(caught.value)
    assert os_reason(caught.value) == (f"the proxy 127.0.0.1:{port} that HTTP_PROXY / HTTPS_PROXY / ALL_PROXY name "
                                       "cannot be reached: Connection refused")


async def test_a_header_with_a_line_break_is_named_and_never_sent(route: str, environment: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    # a secret read with its file's trailing newline: aiohttp refuses to write it (a ValueError, once reported as
    # tamesu's internal error); the line names the header, never its value
    async with echo_server() as port:
        with pytest.raises(ERRORS) as caught:
            await _post(route, tmp_path, f"http://127.0.0.1:{port}/chat", headers={"Authorization": "Bearer tok-7\n"})
    assert type(caught.value).__name__ == "LocalProtocolError", repr(caught.value)
    # (httpx's clients hand the transport names in lower case)
    assert os_reason(caught.value).lower() == ("the header authorization's value ends with a line break, which HTTP "
                                               "cannot carry (a secret or variable read with its file's trailing "
                                               "newline?)").lower()
    assert "tok-7" not in str(caught.value)


async def test_an_early_413_is_read_while_the_body_is_still_going(route: str, environment: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    async with faulty_server("early_413") as port:
        answer = await _post(route, tmp_path, f"http://127.0.0.1:{port}/upload", body=b"x" * 4_000_000)
    assert answer.status_code == 413
    assert answer.json() == {"error": "request entity too large"}


async def test_a_reset_in_the_middle_of_the_body_is_an_error_of_the_clients_kind(
        route: str, environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    connections: list[int] = []
    async with faulty_server("reset", connections) as port:
        with pytest.raises(ERRORS) as caught:
            await _post(route, tmp_path, f"http://127.0.0.1:{port}/upload", body=b"x" * 1_000_000)
    reason = os_reason(caught.value)
    assert reason and "\n" not in reason
    # the connection failed at once and before any answer: a route that resends sent it again once, no more
    assert len(connections) == (1 if route in NO_RESEND else 2)


async def test_a_request_the_agent_worked_on_before_the_reset_is_not_sent_again(
        route: str, environment: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a shorter window than the 2.5 s a user gets, and a server that works past it: the same rule, not 3 s of
    # waiting for each of the six routes (the reset comes WORKED_S after the request was sent, never sooner)
    environment.setattr(aio, "RESEND_WITHIN", WORKED_S / 2)
    connections: list[int] = []
    async with faulty_server("reset_after_working", connections) as port:
        with pytest.raises(ERRORS):
            await _post(route, tmp_path, f"http://127.0.0.1:{port}/order", body=b'{"buy": 1}')
    assert connections == [1]  # past RESEND_WITHIN: the agent may have acted on it
