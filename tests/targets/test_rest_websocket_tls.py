"""`streaming: websocket` to a wss:// agent honours the target's `tls:` block as its HTTP requests do: `ca_file` (an
agent behind an internal CA), `verify: false`, a client certificate (mTLS) and `server_name`; against a real
websocket server on 127.0.0.1 with a certificate of a CA made here (trustme)."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from websockets.asyncio.server import ServerConnection, serve

from sessions import new_session
from tamesu.conversation import UserTurn
from tamesu.errors import InfraError
from tamesu.net import tls
from tamesu.targets.rest.target import RestSpec, RestTarget


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


async def _answer(conn: ServerConnection) -> None:
    async for message in conn:
        said = json.loads(message)["message"]
        await conn.send(json.dumps({"delta": f"over TLS: {said}", "done": True}))


async def _wss(context: ssl.SSLContext) -> AsyncIterator[str]:
    async with serve(_answer, "127.0.0.1", 0, ssl=context) as server:
        yield f"wss://127.0.0.1:{server.sockets[0].getsockname()[1]}/ws"


@pytest.fixture
async def agent(ca: trustme.CA) -> AsyncIterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("agent.internal").configure_cert(context)  # reached by IP: server_name names it
    async for url in _wss(context):
        yield url


@pytest.fixture
async def mtls_agent(ca: trustme.CA) -> AsyncIterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    async for url in _wss(context):
        yield url


async def _turn(tmp_path: Path, url: str, block: dict[str, Any]) -> str:
    tls._context.cache_clear()  # a block's context is kept per process; each test's CA files are new
    spec = {"type": "rest", "url": url, "streaming": "websocket", "tls": block, "connect": {"attempts": 1}}
    target = RestTarget(RestSpec.model_validate(spec), "api")
    try:
        await target.open(new_session(tmp_path))
        return (await target.send(UserTurn(text="hi"))).text
    finally:
        await target.close()


async def test_a_ca_file_and_server_name_are_trusted(agent: str, ca: trustme.CA, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    block = {"ca_file": str(tmp_path / "ca.pem"), "server_name": "agent.internal"}
    assert await _turn(tmp_path, agent, block) == "over TLS: hi"


async def test_verify_false_checks_nothing(agent: str, tmp_path: Path) -> None:
    assert await _turn(tmp_path, agent, {"verify": False}) == "over TLS: hi"


async def test_a_client_certificate_is_presented(mtls_agent: str, ca: trustme.CA, tmp_path: Path) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client = ca.issue_cert("tamesu-client")
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    block = {"ca_file": str(tmp_path / "ca.pem"), "cert_file": str(tmp_path / "client.pem"),
             "key_file": str(tmp_path / "client.key")}
    assert await _turn(tmp_path, mtls_agent, block) == "over TLS: hi"


async def test_without_the_ca_one_line_says_it_is_not_trusted(agent: str, tmp_path: Path) -> None:
    with pytest.raises(InfraError, match=r"TLS: the certificate's CA is not trusted"):
        await _turn(tmp_path, agent, {"server_name": "agent.internal"})


@pytest.mark.parametrize("kind", ["voice", "realtime", "pipecat"])
async def test_the_audio_and_realtime_websockets_take_the_tls_block_too(agent: str, ca: trustme.CA, tmp_path: Path,
                                                                        kind: str) -> None:
    # before: their wss:// used the platform's store alone, whatever the target's `tls:` block said: an agent
    # behind an internal CA was refused with "give it with tls.ca_file", which the suite had
    from tamesu.targets import target_class

    tls._context.cache_clear()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    block = {"ca_file": str(tmp_path / "ca.pem"), "server_name": "agent.internal"}
    for given, trusted in ((block, True), (None, False)):
        cls = target_class(kind)
        # the TLS handshake, where the CA is trusted or not, is bounded by connect.timeout: 60 s, not 10, for a
        # niced worker on a loaded machine. turn_timeout bounds only the wait, after a trusted handshake, for a
        # session this echo agent never opens, and that wait ending (an error that names no certificate) passes
        spec = {"type": kind, "url": agent, "connect": {"attempts": 1, "timeout": "60s"}, "turn_timeout": "1s",
                "tls": given}
        target = cls(cls.Spec.model_validate(spec), "agent")
        try:
            await target.open(new_session(tmp_path))
        except InfraError as exc:
            said = str(exc)
        else:
            said = "opened"
        finally:
            await target.close()
        if trusted:
            assert "certificate" not in said, said
        else:
            assert "TLS: the certificate's CA is not trusted" in said, said
