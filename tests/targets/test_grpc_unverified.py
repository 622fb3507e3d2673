"""`tls.verify: false` on the grpc target: the example agent over TLS with a certificate from a CA made here
(trustme), which neither the platform's store nor a `ca_file` has, for a name that is not the address dialled.
The channel goes through a relay on 127.0.0.1 whose TLS checks nothing (`tamesu.net.unverified_grpc`); the run
warns as every `verify: false` does, doctor probes through the same relay, and the relay ends with the target."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from ports import refused_port
from sessions import events, new_session
from targets.test_grpc_target import HEADERS, TOKEN, Agent, _stop, start_agent

WARNING = "warning: TLS certificates are not checked for a tls: block with verify: false"


@pytest.fixture(scope="module")
def untrusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    folder = tmp_path_factory.mktemp("untrusted")
    leaf = trustme.CA().issue_cert("agent.internal")
    (folder / "agent.pem").write_bytes(b"".join(pem.bytes() for pem in leaf.cert_chain_pems))
    leaf.private_key_pem.write_to_path(str(folder / "agent.key"))
    process, agent = start_agent(3, "--tls-cert", str(folder / "agent.pem"), "--tls-key", str(folder / "agent.key"))
    try:
        assert agent.url.startswith("grpcs://127.0.0.1:"), agent.url
        yield agent
    finally:
        _stop(process)


def _suite(folder: Path, url: str, tls: str) -> None:
    (folder / "suite.yaml").write_text(f"""name: unchecked
targets:
  stream: {{ type: grpc, url: "{url}", headers: {HEADERS}{tls}, connect: {{ attempts: 1, timeout: 3s }} }}
  unary: {{ type: grpc, url: "{url}", mode: unary, headers: {HEADERS}{tls}, connect: {{ attempts: 1 }} }}
tests:
""" + "".join(f"""  - {{ name: {name}, target: {name}, assert: [ {{ contains: shipped }} ],
      scenario: {{ script: [ {{ say: "Where is my order ORD-1001?" }} ] }} }}
""" for name in ("stream", "unary")))


def test_verify_false_passes_a_conversation_with_the_warning_and_doctor_probes_through_the_relay(
        untrusted: Agent, tmp_path: Path, tamesu) -> None:
    # before: `verify: false` was a suite error on the grpc target (exit 2); the a2a target had the relay
    _suite(tmp_path, untrusted.url, ", tls: { verify: false }")
    done: subprocess.CompletedProcess[str] = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert WARNING in said, said
    doctor = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert (f"ok    target stream (grpc) at {untrusted.url}: gRPC channel ready (TCP, TLS with the certificate not "
            "checked, HTTP/2)") in doctor.stdout, doctor.stdout
    assert WARNING in doctor.stdout + doctor.stderr
    # without it the certificate is checked, and refused: one line, exit 3
    _suite(tmp_path, untrusted.url, "")
    refused = tamesu(["run", "suite.yaml", "--out", "refused"], cwd=tmp_path)
    said = refused.stdout + refused.stderr
    assert refused.returncode == 3 and "Traceback" not in said and WARNING not in said, said
    assert f"cannot reach the agent at {untrusted.url} after 1 attempt(s)" in said, said


async def test_the_relay_ends_with_the_target_and_an_agent_it_cannot_reach_is_said_as_such(
        untrusted: Agent, tmp_path: Path) -> None:
    from tamesu.conversation import UserTurn
    from tamesu.errors import InfraError
    from tamesu.targets.grpc_turn.target import GrpcSpec, GrpcTarget

    session = new_session(tmp_path)
    spec = GrpcSpec.model_validate({"type": "grpc", "url": untrusted.url, "tls": {"verify": False},
                                    "headers": {"Authorization": f"Bearer {TOKEN}"}})
    target = GrpcTarget(spec, "shop")
    await target.open(session)
    try:
        relay = target._relay
        assert relay is not None
        assert "shipped" in (await target.send(UserTurn(text="Where is my order ORD-1001?"))).text
    finally:
        await target.close()
    assert target._relay is None and events(session, "transport")[0]["url"] == untrusted.url
    host, port = relay.address.rsplit(":", 1)
    with pytest.raises(ConnectionRefusedError):  # nothing listens where the relay did
        socket.create_connection((host, int(port)), timeout=2).close()
    # an agent the relay cannot reach: its reason, not gRPC's "the connection failed" of the relay's socket
    gone = f"grpcs://127.0.0.1:{refused_port()}"
    unreachable = GrpcTarget(GrpcSpec.model_validate({"type": "grpc", "url": gone, "tls": {"verify": False},
                                                      "connect": {"attempts": 1}}), "gone")
    with pytest.raises(InfraError, match=r"cannot reach the agent at grpcs://127.0.0.1:\d+ after 1 attempt\(s\): "
                                         r"UNAVAILABLE \(TLS \(certificate not checked\) to 127.0.0.1:\d+: .*refused"):
        await unreachable.open(new_session(tmp_path))


def test_verify_false_refuses_a_host_the_environment_sends_through_a_proxy(tmp_path: Path, tamesu) -> None:
    # the relay reaches the agent directly: a proxy named for the host would be gone around without a word
    (tmp_path / "suite.yaml").write_text("""name: proxied
targets:
  shop: { type: grpc, url: "grpcs://shop.invalid:443", tls: { verify: false }, connect: { attempts: 1 } }
tests:
  - { name: t, target: shop, scenario: { script: [ { say: hi } ] } }
""")
    done = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"HTTPS_PROXY": "http://127.0.0.1:9"})
    said = done.stdout + done.stderr
    assert done.returncode == 3 and "Traceback" not in said, said
    assert ("grpc target shop: tls.verify: false over gRPC connects to shop.invalid:443 directly, and the environment "
            "names a proxy for it: give the agent's CA as tls.ca_file instead, or add the host to NO_PROXY") in said
