"""`tls:` on a forwarding remote agent: a real agent behind an internal CA, one that requires a client certificate
(mTLS), one whose certificate names another host, over HTTPS and over gRPC with TLS.

The real agent is a scripted remote agent behind a TLS front started here (a TCP relay that ends TLS with a
certificate of a CA made by trustme, and can require a client certificate): every byte of the handshake is real.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import trustme
from a2a.types import a2a_pb2
from a2a.types.a2a_pb2 import TaskState

from remote.test_remote_agents import BILLING, agents, request
from sdk_groups import IN_PROCESS_A2A_SERVER

pytestmark = IN_PROCESS_A2A_SERVER


@asynccontextmanager
async def tls_front(backend: str, ca: trustme.CA, *, names: tuple[str, ...] = ("127.0.0.1",),
                    client_ca: trustme.CA | None = None) -> AsyncIterator[str]:
    """host:port of a TLS server relaying each connection to `backend` (host:port), both ways."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    context.set_alpn_protocols(["h2", "http/1.1"])  # gRPC needs h2 agreed in the handshake
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        client_ca.configure_trust(context)
    host, port = backend.rsplit(":", 1)
    tasks: set[asyncio.Task[Any]] = set()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            back_reader, back_writer = await asyncio.open_connection(host, int(port))
            await asyncio.gather(pipe(reader, back_writer), pipe(back_reader, writer))
        finally:
            writer.close()
            tasks.discard(task)

    server = await asyncio.start_server(relay, "127.0.0.1", 0, ssl=context)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _pem(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _client_cert(tmp_path: Path) -> tuple[trustme.CA, dict[str, str]]:
    issuer = trustme.CA()
    leaf = issuer.issue_cert("tamesu.client")
    leaf.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    return issuer, {"cert_file": str(tmp_path / "client.pem"), "key_file": str(tmp_path / "client.key")}


async def _ask(url: str, text: str, version: str = "1.0") -> httpx.Response:
    """A JSON-RPC send to the proxy, as raw as it goes (the card the proxy relays names the real agent's own
    plain origin behind the TLS front, which it drops, so no SDK client is built from it)."""
    message: dict[str, Any] = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}
    method = "SendMessage"
    if version == "0.3":
        message, method = {"kind": "message", "messageId": "m", "role": "user",
                           "parts": [{"kind": "text", "text": text}]}, "message/send"
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(url, headers={"A2A-Version": version}, json={
            "jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}})


def _state(answer: httpx.Response) -> str:
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    return str((result.get("task") or result)["status"]["state"])


def _failure(group: Any) -> str:
    [event] = [e for e in group._session.events if e.name == "forward_failed"]
    return str(event.data["error"])


async def test_https_forward_trusts_the_ca_in_tls_and_says_a_refused_certificate_in_one_line(
        tmp_path: Path, ca: trustme.CA) -> None:
    # before: `forward` had no tls: block, so a real agent behind an internal CA could not be forwarded to
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            tls_front(real.urls["billing"]["url"].removeprefix("http://"), ca) as front:
        trusted = {"forward": f"https://{front}", "tls": {"ca_file": _pem(ca, tmp_path)}}
        async with agents(tmp_path / "proxy", {"billing": trusted}) as proxy:
            answer = await _ask(proxy.urls["billing"]["url"], "A refund for ORD-1001 please")
        async with agents(tmp_path / "untrusted", {"billing": {"forward": f"https://{front}"}}) as untrusted:
            refused = await _ask(untrusted.urls["billing"]["url"], "refund ORD-9")
    assert _state(answer) == "TASK_STATE_COMPLETED"
    assert answer.json()["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "Refund issued, reference RF-889"
    assert refused.status_code == 502
    assert [(d.message, d.forwarded) for d in proxy.delegations] == [("A refund for ORD-1001 please",
                                                                      f"https://{front}")]
    reason = _failure(untrusted)
    assert reason.startswith("the real agent did not answer: ConnectError: TLS: the certificate's CA is not "
                             "trusted (give it with tls.ca_file or SSL_CERT_FILE)"), reason
    assert "\n" not in reason


async def test_mtls_and_server_name(tmp_path: Path, ca: trustme.CA) -> None:
    issuer, certificate = _client_cert(tmp_path)
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            tls_front(real.urls["billing"]["url"].removeprefix("http://"), ca, names=("billing.internal",),
                      client_ca=issuer) as front:
        tls = {"ca_file": _pem(ca, tmp_path), "server_name": "billing.internal", **certificate}
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"https://{front}", "tls": tls}}) as proxy:
            answer = await _ask(proxy.urls["billing"]["url"], "refund ORD-2", "0.3")
        without = {"ca_file": _pem(ca, tmp_path), "server_name": "billing.internal"}
        async with agents(tmp_path / "anon", {"billing": {"forward": f"https://{front}", "tls": without}}) as anon:
            assert (await _ask(anon.urls["billing"]["url"], "refund ORD-8")).status_code == 502
        wrong_name = {"ca_file": _pem(ca, tmp_path), **certificate}
        async with agents(tmp_path / "named", {"billing": {"forward": f"https://{front}", "tls": wrong_name}}) as named:
            assert (await _ask(named.urls["billing"]["url"], "refund ORD-7")).status_code == 502
    assert _state(answer) == "completed"
    assert [d.message for d in proxy.delegations] == ["refund ORD-2"]
    assert _failure(anon).startswith("the real agent did not answer: ") and _failure(anon).endswith(
        "a server that requires a client certificate does this: give tls.cert_file and tls.key_file"), _failure(anon)
    assert "TLS: the certificate is for another host" in _failure(named), _failure(named)


async def test_verify_false_forwards_without_checking(tmp_path: Path, ca: trustme.CA) -> None:
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            tls_front(real.urls["billing"]["url"].removeprefix("http://"), ca) as front, \
            agents(tmp_path / "proxy", {"billing": {"forward": f"https://{front}", "tls": {"verify": False}}}
                   ) as proxy:
        answer = await _ask(proxy.urls["billing"]["url"], "refund ORD-3")
    assert _state(answer) == "TASK_STATE_COMPLETED"
    assert [d.message for d in proxy.delegations] == ["refund ORD-3"]


async def test_grpcs_forward_with_the_ca_and_a_client_certificate(tmp_path: Path, ca: trustme.CA) -> None:
    issuer, certificate = _client_cert(tmp_path)
    sent = a2a_pb2.SendMessageRequest(message=request("refund ORD-4").message).SerializeToString()
    path = "/lf.a2a.v1.A2AService/SendMessage"
    said: dict[str, str] = {}
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            tls_front(real.urls["billing"]["grpc"], ca, client_ca=issuer) as front:
        tls = {"ca_file": _pem(ca, tmp_path), **certificate}
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"grpcs://{front}", "tls": tls}}) as proxy, \
                grpc.aio.insecure_channel(proxy.urls["billing"]["grpc"]) as channel:
            answer = a2a_pb2.SendMessageResponse.FromString(await channel.unary_unary(path)(sent, timeout=10))
        async with agents(tmp_path / "untrusted", {"billing": {"forward": f"grpcs://{front}"}}) as untrusted, \
                grpc.aio.insecure_channel(untrusted.urls["billing"]["grpc"]) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await channel.unary_unary(path)(sent, timeout=10)
        for name, partial in (("anon", {"ca_file": _pem(ca, tmp_path)}),
                              ("named", {"ca_file": _pem(ca, tmp_path), "server_name": "elsewhere", **certificate})):
            async with agents(tmp_path / name, {"billing": {"forward": f"grpcs://{front}", "tls": partial}}) as group, \
                    grpc.aio.insecure_channel(group.urls["billing"]["grpc"]) as channel:
                with pytest.raises(grpc.aio.AioRpcError):
                    await channel.unary_unary(path)(sent, timeout=10)
            said[name] = _failure(group)
    assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [d.message for d in proxy.delegations] == ["refund ORD-4"]
    assert said["anon"].startswith("the real agent did not answer: UNAVAILABLE: ") and said["anon"].endswith(
        "; a TLS server that requires a client certificate closes the connection so: give tls.cert_file and "
        "tls.key_file"), said["anon"]
    assert said["named"] == "the real agent did not answer: TLS: the certificate is for another host " \
                            "(tls.server_name: the name it carries)", said["named"]
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    reason = _failure(untrusted)
    assert reason == "the real agent did not answer: TLS: the certificate's CA is not trusted (give it with " \
                     "tls.ca_file or SSL_CERT_FILE)", reason
    assert "\n" not in reason


async def test_grpcs_forward_with_verify_false_reaches_an_agent_whose_certificate_nobody_trusts(
        tmp_path: Path, ca: trustme.CA) -> None:
    # before: refused where written ("not possible over gRPC"); the channel now goes through the relay the grpc
    # and a2a targets use for verify: false, which is gone once the remote agent stops
    sent = a2a_pb2.SendMessageRequest(message=request("refund ORD-8").message).SerializeToString()
    path = "/lf.a2a.v1.A2AService/SendMessage"
    async with agents(tmp_path / "real", {"billing": BILLING}) as real, \
            tls_front(real.urls["billing"]["grpc"], ca) as front:
        async with agents(tmp_path / "proxy", {"billing": {"forward": f"grpcs://{front}", "tls": {"verify": False}}}
                          ) as proxy, grpc.aio.insecure_channel(proxy.urls["billing"]["grpc"]) as channel:
            answer = a2a_pb2.SendMessageResponse.FromString(await channel.unary_unary(path)(sent, timeout=10))
            [server] = proxy.servers
            unchecked = server._unchecked
            assert unchecked is not None
            # a private Unix socket: no other process reaches the agent through it with the block's certificate
            assert unchecked.address.startswith("unix:/"), unchecked.address
            folder = os.path.dirname(unchecked.address.removeprefix("unix:"))
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert not os.path.exists(folder), "the relay's socket outlived the remote agent"
    assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [d.message for d in proxy.delegations] == ["refund ORD-8"]


def test_a_tls_block_that_cannot_apply_is_refused_where_written() -> None:
    from pydantic import ValidationError

    from tamesu.suite.remote_agents import RemoteAgentSpec

    for spec, said in [({"tls": {"ca_file": "ca.pem"}}, "tls only applies with forward"),
                       ({"forward": "http://billing/a2a", "tls": {"ca_file": "ca.pem"}},
                        "tls is for an https:// or grpcs:// forward: http:// is plaintext"),
                       ({"forward": "grpc://billing:50051", "tls": {"ca_file": "ca.pem"}},
                        "tls is for an https:// or grpcs:// forward: grpc:// is plaintext")]:
        with pytest.raises(ValidationError, match=said):
            RemoteAgentSpec.model_validate(spec)
    assert RemoteAgentSpec.model_validate({"forward": "https://billing/a2a", "tls": {"verify": False}}).tls
    assert RemoteAgentSpec.model_validate({"forward": "grpcs://billing:50051", "tls": {"verify": False}}).tls


SUITE = """\
remote_agents:
  shop: {{ forward: "{forward}"{tls} }}
targets:
  rpc: {{ type: a2a, url: "{{{{remote.shop.url}}}}" }}
tests:
  - {{ name: through, target: rpc, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: x }} ] }}
"""


@pytest.mark.parametrize("case", ["untrusted", "missing file"])
def test_a_run_whose_forward_fails_tls_is_one_line_and_exit_3(
        tamesu: Any, tmp_path: Path, ca: trustme.CA, case: str) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Route

    from net.test_wire_cli import HttpsServer, _desk

    with HttpsServer(Starlette(routes=[Route("/a2a", _desk, methods=["POST"])]), ca, tmp_path) as url:
        tls = "" if case == "untrusted" else ", tls: { ca_file: nowhere.pem }"
        (tmp_path / "f.tamesu.yaml").write_text(SUITE.format(forward=f"{url}/a2a", tls=tls), encoding="utf-8")
        done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path,
                      env={"SSL_CERT_FILE": "", "SSL_CERT_DIR": ""})
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "Traceback" not in output
    if case == "untrusted":
        said = f"remote agent shop: forward to {url}/a2a: the real agent did not answer: ConnectError: TLS: the " \
               "certificate's CA is not trusted"
    else:
        said = "remote agent shop: tls.ca_file: no such file: nowhere.pem"
    assert [line for line in output.splitlines() if said in line], output
