"""`tls.verify: false` on the grpc target: the example agent over TLS with a certificate from a CA made here
(trustme), which neither the platform's store nor a `ca_file` has, for a name that is not the address dialled.
The channel goes through a relay on a private Unix socket whose TLS checks nothing (`tamesu.net.unverified_grpc`);
the run warns as every `verify: false` does, doctor probes through the same relay, the relay listens on no TCP port
and lets no other user in, and it ends with the target."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from lifeline import tied
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
    # before: Python 3.11 logged each relayed connection the target's close cancelled, with a traceback
    assert WARNING in said and "Traceback" not in said and "Exception in callback" not in said, said
    doctor = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert (f"ok    target stream (grpc) at {untrusted.url}: gRPC channel ready (TCP, TLS with the certificate not "
            "checked, HTTP/2)") in doctor.stdout, doctor.stdout
    assert WARNING in doctor.stdout + doctor.stderr and "Traceback" not in doctor.stdout + doctor.stderr
    # without it the certificate is checked, and refused: one line, exit 3
    _suite(tmp_path, untrusted.url, "")
    refused = tamesu(["run", "suite.yaml", "--out", "refused"], cwd=tmp_path)
    said = refused.stdout + refused.stderr
    assert refused.returncode == 3 and "Traceback" not in said and WARNING not in said, said
    assert f"cannot reach the agent at {untrusted.url} after 1 attempt(s)" in said, said


def _tcp_listeners() -> set[int]:
    """The TCP ports this process listens on (its sockets' inodes in /proc/net/tcp{,6}, state 0A)."""
    ours = {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.islink(f"/proc/self/fd/{fd}")}
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and f"socket:[{fields[9]}]" in ours:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


_AS_NOBODY = ("import os, socket, sys\nos.setgroups([])\nos.setgid(65534)\nos.setuid(65534)\n"
              "socket.socket(socket.AF_UNIX).connect(sys.argv[1])\n")
"""Root's python becomes another user itself: `subprocess.run(user=)` forks this process, whose gRPC
threads do not survive a fork, and that user may not be allowed to start the venv's python."""


async def test_the_relay_is_private_and_ends_with_the_target_and_an_agent_it_cannot_reach_is_said_as_such(
        untrusted: Agent, tmp_path: Path) -> None:
    from tamesu.conversation import UserTurn
    from tamesu.errors import InfraError
    from tamesu.targets.grpc_turn.target import GrpcSpec, GrpcTarget

    session = new_session(tmp_path)
    spec = GrpcSpec.model_validate({"type": "grpc", "url": untrusted.url, "tls": {"verify": False},
                                    "headers": {"Authorization": f"Bearer {TOKEN}"}})
    target = GrpcTarget(spec, "shop")
    before = _tcp_listeners()
    await target.open(session)
    try:
        relay = target._relay
        assert relay is not None
        assert "shipped" in (await target.send(UserTurn(text="Where is my order ORD-1001?"))).text
        # before: it listened on 127.0.0.1, where any local process could call the agent through it (under the
        # block's client certificate, when it names one) while the run lasted
        assert _tcp_listeners() == before, "the relay listens on TCP"
        assert relay.address.startswith("unix:/"), relay.address
        path = relay.address.removeprefix("unix:")
        folder = os.stat(os.path.dirname(path))
        assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == os.getuid()
        if os.getuid() == 0:  # root can become another user to show it
            other = subprocess.run([sys.executable, "-I", "-c", _AS_NOBODY, path], capture_output=True, text=True,
                                   timeout=30)
            assert other.returncode == 1 and "PermissionError" in other.stderr, other.stderr
    finally:
        await target.close()
    assert target._relay is None and events(session, "transport")[0]["url"] == untrusted.url
    assert not os.path.exists(os.path.dirname(path)), "the relay's folder outlived it"
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


async def test_a_temporary_folder_too_deep_for_a_socket_path_puts_the_relay_in_tmp(
        untrusted: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from tamesu.net.grpc_channels import grpc_channel, ready
    from tamesu.net.tls import TlsSpec

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))  # TMPDIR, as tempfile read it
    channel, relay = grpc_channel(untrusted.url.removeprefix("grpcs://"), True, TlsSpec(verify=False), timeout=5)
    try:
        assert relay is not None and relay.address.startswith("unix:/tmp/tamesu-grpc-relay-"), relay
        assert await ready(channel, 5) == ""
    finally:
        await channel.close()
        assert relay is not None
        await relay.close()
    assert not os.path.exists(os.path.dirname(relay.address.removeprefix("unix:")))


_HOLDS_A_RELAY = """import asyncio
from tamesu.net.tls import TlsSpec
from tamesu.net.unverified_grpc import UncheckedRelay, unchecked_context

async def main() -> None:
    relay = UncheckedRelay("127.0.0.1:9", unchecked_context(TlsSpec(verify=False)), None, 1)
    print(relay.address, flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def _holding_a_relay(temp: Path, started: list[subprocess.Popen[str]]) -> tuple[subprocess.Popen[str], Path]:
    """A process with a relay open, its temporary folder `temp` (added to `started`); and the relay's folder."""
    process = subprocess.Popen(tied([sys.executable, "-c", _HOLDS_A_RELAY]), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env={**os.environ, "TMPDIR": str(temp)})
    started.append(process)
    assert process.stdout is not None
    address = process.stdout.readline().strip()
    assert address.startswith(f"unix:{temp}/tamesu-grpc-relay-"), address
    return process, Path(address.removeprefix("unix:")).parent


def test_a_relay_folder_a_killed_run_left_is_removed_by_the_next_run_and_no_other(
        untrusted: Agent, tmp_path: Path, tamesu) -> None:
    import shutil
    import tempfile

    # a short TMPDIR: a socket path under tmp_path is too long, and the relay would go to /tmp itself
    temp = Path(tempfile.mkdtemp(prefix="relays-", dir="/tmp"))
    started: list[subprocess.Popen[str]] = []
    try:
        killed, left = _holding_a_relay(temp, started)
        _, kept = _holding_a_relay(temp, started)  # still running when the run starts
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert (left / "socket").exists()  # what the killed process could not remove
        legacy = temp / "tamesu-grpc-relay-k3x9q2ab"  # an older tamesu's name: whose it is cannot be told
        legacy.mkdir()
        not_ours = temp / f"tamesu-grpc-relay-{killed.pid}-other"
        not_ours.mkdir()
        if os.getuid() == 0:
            os.chown(not_ours, 65534, 65534)
        _suite(tmp_path, untrusted.url, ", tls: { verify: false }")
        done = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"TMPDIR": str(temp)})
        assert done.returncode == 0, done.stdout + done.stderr
        # before: every SIGKILLed run's folder stayed in the temporary folder for good
        assert not left.exists(), "the killed process's relay folder is still there"
        assert kept.is_dir() and (kept / "socket").exists(), "a running process's relay folder was removed"
        assert legacy.is_dir()
        # root gave it to nobody: another user's is left; otherwise it is this user's, of a process that is gone
        assert not_ours.is_dir() if os.getuid() == 0 else not not_ours.exists()
    finally:
        for process in started:
            process.kill()
            process.wait(timeout=30)
        shutil.rmtree(temp, ignore_errors=True)
