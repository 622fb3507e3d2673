"""The a2a target against A2A agents written to misbehave (1.0 and 0.3 over JSON-RPC)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from a2a.types import a2a_pb2_grpc
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sdk_groups import IN_PROCESS_A2A_SERVER
from sessions import events
from tamesu.conversation import TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.net.serve import ThreadServer
from tamesu.targets.a2a import A2ASpec, A2ATarget
from targets.test_a2a_target import agents, make_session, opened

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

pytestmark = IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side

__all__ = ["agents"]  # a fixture, imported to be found by pytest


class Faulty:
    """`/v1/...` speaks A2A 1.0, `/v03/...` A2A 0.3; `wrong-id` in the path answers with another request's id,
    `stream` answers over SSE; `/odd/` has a card offering only bindings nobody speaks; `/v03/reask/` asks "Which
    order?" (input-required) twice, its status the same each time (one messageId, no timestamp, as a hand-written
    agent writes it), then completes; it answers message/send, message/stream (status-update events) and
    tasks/get."""

    def __init__(self) -> None:
        self.origin = ""
        self.refused: dict[str, int] = {}
        self.asked: dict[str, int] = {}

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/{version}/{mode}/rpc/.well-known/agent-card.json", self.card),
            Route("/{version}/{mode}/rpc", self.rpc, methods=["POST"]),
        ])

    async def card(self, request: Request) -> Response:
        version, mode = request.path_params["version"], request.path_params["mode"]
        url = f"{self.origin}/{version}/{mode}/rpc"
        base: dict[str, Any] = {"name": "faulty", "description": "misbehaves", "version": "1",
                                "capabilities": {"streaming": mode == "stream"}, "skills": [],
                                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]}
        if version == "odd":
            return JSONResponse({**base, "supportedInterfaces": [
                {"url": f"{self.origin}/ws", "protocolBinding": "WEBSOCKET", "protocolVersion": "1.0"},
                {"url": f"{self.origin}/soap", "protocolBinding": "SOAP", "protocolVersion": "1.0"}]})
        if version == "v03":
            return JSONResponse({**base, "url": url, "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0"})
        return JSONResponse({**base, "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})

    async def rpc(self, request: Request) -> Response:
        version, mode = request.path_params["version"], request.path_params["mode"]
        payload = await request.json()
        if mode.startswith("limited-"):  # `limited-N-key`: the first N requests of `key` are refused with 429
            _, refusals, key = mode.split("-", 2)
            self.refused[key] = self.refused.get(key, 0) + 1
            if refusals == "always" or self.refused[key] <= int(refusals):
                return JSONResponse({"error": "rate limited"}, status_code=429, headers={"Retry-After": "0.1"})
        if mode == "reask":
            return self.reask(payload)
        answer_id = f"{payload['id']}-other" if mode in ("wrong-id", "stream") else payload["id"]
        if version == "v03":
            result: dict[str, Any] = {"kind": "message", "role": "agent", "messageId": "m1",
                                      "parts": [{"kind": "text", "text": "hello"}]}
        else:
            result = {"message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}}
        body = {"jsonrpc": "2.0", "id": answer_id, "result": result}
        if mode == "stream":
            import json

            async def events() -> Any:
                yield f"data: {json.dumps(body)}\n\n".encode()
            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse(body)


    def reask(self, payload: dict[str, Any]) -> Response:
        import json

        params = payload["params"]
        task_id = params.get("id") or params["message"].get("taskId") or f"t{len(self.asked)}"
        if payload["method"] != "tasks/get":
            self.asked[task_id] = self.asked.get(task_id, 0) + 1
        done = self.asked[task_id] > 2
        status = {"state": "completed" if done else "input-required", "message": {
            "kind": "message", "role": "agent", "messageId": "done" if done else "ask",
            "parts": [{"kind": "text", "text": "Noted" if done else "Which order?"}]}}
        task = {"kind": "task", "id": task_id, "contextId": "c1", "status": status}
        if payload["method"] != "message/stream":
            return JSONResponse({"jsonrpc": "2.0", "id": payload["id"], "result": task})
        update = {"kind": "status-update", "taskId": task_id, "contextId": "c1", "status": status, "final": True}
        frames = [{"jsonrpc": "2.0", "id": payload["id"], "result": doc} for doc in (task, update)]
        return Response("".join(f"data: {json.dumps(frame)}\n\n" for frame in frames),
                        media_type="text/event-stream")


@pytest.fixture(scope="module")
def faulty() -> Iterator[Faulty]:
    agent = Faulty()
    with ThreadServer(agent.app()) as server:
        agent.origin = server.url
        yield agent


@pytest.mark.parametrize("version", ["v1", "v03"])
async def test_a_reply_with_another_requests_id_is_a_protocol_error(faulty: Faulty, tmp_path: Path,
                                                                    version: str) -> None:
    async with opened({"url": f"{faulty.origin}/{version}/ok/rpc"}, make_session(tmp_path)) as target:
        assert (await target.send(UserTurn(text="hi"))).text == "hello"  # the same agent, honest ids
    async with opened({"url": f"{faulty.origin}/{version}/wrong-id/rpc"}, make_session(tmp_path)) as target:
        with pytest.raises(TurnError, match=r"protocol error: the JSON-RPC reply has id \"[^\"]+-other\", not the "
                                            r"request's id"):
            await target.send(UserTurn(text="hi"))


async def test_a_streamed_reply_with_another_requests_id_is_a_protocol_error(faulty: Faulty, tmp_path: Path) -> None:
    async with opened({"url": f"{faulty.origin}/v1/stream/rpc"}, make_session(tmp_path)) as target:
        with pytest.raises(TurnError, match="protocol error: the JSON-RPC reply has id"):
            await target.send(UserTurn(text="hi"))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_question_asked_again_the_same_way_is_the_answer(faulty: Faulty, tmp_path: Path, stream: bool) -> None:
    # before: the repeated status (one messageId, no timestamp) was taken for the task as it stood before the
    # follow-up, so the turn polled tasks/get until turn_timeout and failed, blamed on the agent: an answer to
    # message/send and a status-update event are the agent's answer, only a task read back may be old news
    spec = {"url": f"{faulty.origin}/v03/reask/rpc", "stream": stream, "turn_timeout": "20s"}
    async with opened(spec, make_session(tmp_path)) as target:
        turns = [await target.send(UserTurn(text=words)) for words in ("hello", "which one?", "ORD-1")]
    assert [(t.text, t.response["status"]["state"]) for t in turns] == [
        ("Which order?", "input-required"), ("Which order?", "input-required"), ("Noted", "completed")]


async def test_answers_nested_deeper_than_python_reads_are_the_agents_fault(tmp_path: Path, serve: Any) -> None:
    # before: `internal error: RecursionError` (fault: environment, exit 3), raised reading the card, then by
    # the check of the reply's id, then by a2a-sdk's own reading of the reply
    async def deep(_: Request) -> Response:
        return Response(b"[" * 100_000 + b"]" * 100_000, media_type="application/json")

    site = serve(Starlette(routes=[Route("/{path:path}", deep, methods=["GET", "POST"])]))
    session = make_session(tmp_path)
    async with opened({"url": f"{site.url}/rpc"}, session) as target:
        with pytest.raises(TurnError, match="the answer is JSON nested deeper than Python reads"):
            await target.send(UserTurn(text="hi"))
    tried = events(session, "card_missing")[0]["tried"]
    assert [t.rsplit(": ", 1)[1] for t in tried] == ["JSON nested too deeply to read"] * 4


async def test_a_card_with_no_interface_tamesu_speaks_is_one_line(faulty: Faulty, tmp_path: Path) -> None:
    with pytest.raises(InfraError) as caught:
        async with opened({"url": f"{faulty.origin}/odd/x/rpc"}, make_session(tmp_path)):
            pass
    message = str(caught.value)
    assert "the agent card offers no interface tamesu speaks (JSONRPC, HTTP+JSON, GRPC): it offers " \
           f"WEBSOCKET 1.0 at {faulty.origin}/ws, SOAP 1.0 at {faulty.origin}/soap" in message
    assert "\n" not in message


async def test_a_url_with_no_scheme_once_rendered_is_said_where_it_is(tmp_path: Path) -> None:
    # before: "the agent answered an error: Network communication error: the URL's scheme '' is not http(s)",
    # fault agent, exit 1 (`{{env.AGENT_URL}}` set to host:port, or `{{remote.X.grpc}}` as docs/remote-agents.md
    # names the address)
    session = make_session(tmp_path)
    session.context = session.context.child(vars={"where": "127.0.0.1:9/a2a"})
    with pytest.raises(InfraError) as caught:
        async with opened({"url": "{{vars.where}}"}, session):
            pass
    assert str(caught.value) == (
        "a2a target shop: url '127.0.0.1:9/a2a' (from '{{vars.where}}') must start with http://, https://, grpc:// "
        "or grpcs:// (a remote agent's gRPC address is grpc://{{remote.NAME.grpc}})")


@pytest.mark.parametrize("mode", ["send", "stream"])
async def test_a_task_still_working_at_the_turn_timeout_is_cancelled(agents: A2AAgents, tmp_path: Path,
                                                                     mode: str) -> None:
    session = make_session(tmp_path)
    # `linger` answers at once with a working task and completes only two minutes later: the 3 s turn timeout
    # falls inside the task's work even on a loaded machine (with `early`'s 0.6 s and a 0.3 s timeout, a slow
    # first answer was itself cut by the timeout, and no task was there to cancel)
    spec = {"url": f"{agents.urls['v10']}/a2a", "turn_timeout": "3s", "stream": mode == "stream"}
    async with opened(spec, session) as target:
        with pytest.raises(TurnError, match=r"turn timed out after .*; the (working|submitted) task \S+ was "
                                            r"cancelled"):
            await target.send(UserTurn(text="linger on"))
    [cancel] = [e.data for e in session.events if e.name == "task_cancelled_at_timeout"]
    assert cancel["cancelled"] is True and cancel["now"] == "canceled"
    assert cancel["task_id"] in agents.canceled  # the agent was really asked


class _Stalling(a2a_pb2_grpc.A2AServiceServicer):
    """A gRPC agent whose backend times out: it answers every message with its own DEADLINE_EXCEEDED."""

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the order backend took longer than 2s")


async def test_a_servers_deadline_exceeded_is_reported_as_its_status(tmp_path: Path) -> None:
    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Stalling(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with opened({"url": f"grpc://127.0.0.1:{port}"}, make_session(tmp_path)) as target:
            with pytest.raises(TurnError) as caught:
                await target.send(UserTurn(text="hi"))
    finally:
        await server.stop(grace=None)
    assert str(caught.value) == ("the agent answered an error: gRPC DEADLINE_EXCEEDED: the order backend took "
                                 "longer than 2s")


async def test_a_message_larger_than_a_grpc_agent_takes_is_said_as_its_refusal(tmp_path: Path) -> None:
    # before: "a gRPC message of the answer was larger than max_response_bytes ... raise the target's
    # max_response_bytes": the agent's server had refused our 5 kB message, and that advice could not help
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 2000)])
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Stalling(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with opened({"url": f"grpc://127.0.0.1:{port}"}, make_session(tmp_path)) as target:
            with pytest.raises(TurnError) as caught:
                await target.send(UserTurn(text="x" * 5000))
    finally:
        await server.stop(grace=None)
    said = str(caught.value)
    assert "the agent refused the message: it is larger than the agent takes" in said, said
    assert "max_response_bytes" not in said, said


def test_grpc_unavailable_that_never_reached_the_agent_is_retried_then_infrastructure() -> None:
    """What grpc says when a name does not resolve (not looked up here: no network in tests)."""
    from tamesu.targets.a2a._errors import unreachable

    def error(details: str) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details)

    assert unreachable(error("errors resolving shop.internal:50051: [field:hostname lookup error:address lookup "
                             "failed for shop.internal:50051: Domain name not found]"))
    assert unreachable(error("failed to connect to all addresses; last error: Connection refused"))
    assert unreachable(error("Socket closed")) is None  # broken after the call went out: never resent


@pytest.mark.parametrize("stream", [False, True], ids=["send", "stream"])
@pytest.mark.parametrize("binding", ["jsonrpc", "http", "grpc"])
async def test_an_answer_past_max_response_bytes_is_refused_and_said(agents: A2AAgents, tmp_path: Path,
                                                                     binding: str, stream: bool) -> None:
    session = make_session(tmp_path)
    spec = {"url": f"{agents.urls['v10']}/a2a", "transport": binding, "stream": stream,
            "max_response_bytes": 100_000}
    async with opened(spec, session) as target:
        small = await target.send(UserTurn(text="hello there"))  # under the limit, read as always
        assert small.text.startswith("Echo: hello there")
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="huge please"))
    said = str(caught.value)
    assert "larger than max_response_bytes" in said and "raise the target's max_response_bytes" in said, said
    assert not said.startswith("the agent answered"), said  # tamesu refused it: the agent sent no error
    [refused] = [e.data for e in session.events if e.name == "response_truncated"]
    assert refused["limit"] == 100_000 and refused["complete"] is False
    if binding != "grpc":  # a stream is cut where it passes the limit; a body that declares more, at once
        assert refused["read"] > 100_000 or (refused["declared"] or 0) > 100_000, refused


@pytest.mark.parametrize("version", ["v1", "v03"])
async def test_a_429_is_waited_out_and_said(faulty: Faulty, tmp_path: Path, version: str) -> None:
    # before: the 429 was the turn's error, a failure blamed on the agent for tests run side by side
    session = make_session(tmp_path)
    async with opened({"url": f"{faulty.origin}/{version}/limited-2-{version}/rpc"}, session) as target:
        assert (await target.send(UserTurn(text="hi"))).text == "hello"
    limited = events(session, "rate_limited")
    assert [(e["attempt"], e["retry_after_s"], e["wait_s"]) for e in limited] == [(1, 0.1, 0.1), (2, 0.1, 0.1)]
    assert limited[0]["url"] == f"{faulty.origin}/{version}/limited-2-{version}/rpc"


async def test_a_limit_that_never_lifts_is_an_infrastructure_error(faulty: Faulty, tmp_path: Path) -> None:
    # before: "lower --parallel" at --parallel 1 too, where no other run was asking the agent
    for runs_going, advice in [(1, "raise its limit or rate_limit_retries (one run at a time: no other of "
                                   "tamesu's was asking it)"),
                               (4, "lower --parallel (4 runs were going when it came) or raise its limit")]:
        spec = {"url": f"{faulty.origin}/v1/limited-always-a{runs_going}/rpc", "rate_limit_retries": 2}
        session = make_session(tmp_path)
        session.runs_going = lambda going=runs_going: going  # type: ignore[misc]  # one figure per session
        async with opened(spec, session) as target:
            with pytest.raises(InfraError) as caught:
                await target.send(UserTurn(text="hi"))
        assert str(caught.value).endswith(f": the agent answered HTTP 429 (too many requests) 3 times: {advice} "
                                          "(rate_limit_retries: 0 takes a 429 as the agent's error)"), caught.value
        assert faulty.refused[f"a{runs_going}"] == 3
    # 0: a test of the agent's own limit sees the 429 as the agent's error, at once
    spec = {"url": f"{faulty.origin}/v1/limited-always-b/rpc", "rate_limit_retries": 0}
    async with opened(spec, make_session(tmp_path)) as target:
        with pytest.raises(TurnError, match="the agent answered HTTP 429"):
            await target.send(UserTurn(text="hi"))
    assert faulty.refused["b"] == 1


async def test_a_card_search_against_a_server_that_never_answers_stops_at_the_first_place_that_hung(
        tmp_path: Path) -> None:
    # before: each of the four well-known places waited its whole connect.timeout + turn_timeout in turn (4 x 2 s
    # here, 4 x 70 s by default) before the run said a word
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # the system completes each connection; nobody ever reads a byte or answers
    try:
        url = f"http://127.0.0.1:{hung.getsockname()[1]}/agents/shop/rpc"
        session = make_session(tmp_path)
        target = A2ATarget(A2ASpec.model_validate(
            {"type": "a2a", "url": url, "turn_timeout": "1s", "connect": {"timeout": "1s"}}), "shop")
        started = time.monotonic()
        try:
            await target.open(session)
        finally:
            await target.close()
        took = time.monotonic() - started
    finally:
        hung.close()
    [missing] = events(session, "card_missing")
    origin = url.split("/agents")[0]
    assert missing["tried"] == [
        f"{origin}/.well-known/agent-card.json: no whole answer within 2s (connect.timeout + turn_timeout); the "
        "server took the connection and gave no whole answer: the other 3 places were not tried"], missing
    assert took < 3.5, took


async def test_a_grpcs_agent_is_trusted_as_the_targets_tls_block_says(agents: A2AAgents, tmp_path: Path) -> None:
    # before: the channel trusted the platform's store alone: the tls: block (ca_file, server_name, a client
    # certificate) was dropped, and an agent behind an internal CA could not be reached however it was written
    import httpx
    import trustme
    from a2a.server.request_handlers import GrpcHandler
    from a2a.types.a2a_pb2 import AgentInterface

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    leaf = ca.issue_cert("shop.internal")
    chain = b"".join(pem.bytes() for pem in leaf.cert_chain_pems)
    server = grpc.aio.server()
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(leaf.private_key_pem.bytes(), chain)]))
    url = f"grpcs://127.0.0.1:{port}"
    card = agents.card("grpc")
    del card.supported_interfaces[:]
    card.supported_interfaces.append(AgentInterface(url=url, protocol_binding="GRPC", protocol_version="1.0"))
    async with httpx.AsyncClient(timeout=5) as push:
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(agents._handler(card, push, extended=card)), server)
        await server.start()
        try:
            tls = {"ca_file": str(tmp_path / "ca.pem"), "server_name": "shop.internal"}
            session = make_session(tmp_path)
            async with opened({"url": url, "tls": tls, "connect": {"attempts": 1}}, session) as target:
                turn = await target.send(UserTurn(text="ping"))
            assert turn.text == "pong"
            assert events(session, "card")[0]["found_at"] == f"{url} (GetExtendedAgentCard, A2A 1.0)"
            # and without the block the same agent is refused, as the certificate's CA is not the platform's
            with pytest.raises(InfraError, match="cannot reach"):
                async with opened({"url": url, "connect": {"attempts": 1}, "turn_timeout": "5s"},
                                  make_session(tmp_path)) as target:
                    await target.send(UserTurn(text="ping"))
        finally:
            await server.stop(None)


async def test_tls_verify_false_reaches_the_grpcs_interface_an_https_card_names(agents: A2AAgents,
                                                                                tmp_path: Path) -> None:
    # before: the https card was read unchecked, as the tls: block's verify: false says, but the gRPC channel to
    # the interface it names checked the certificate all the same: "cannot reach" an agent the suite trusts
    import httpx
    import trustme
    from a2a.server.request_handlers import GrpcHandler
    from a2a.server.routes import create_agent_card_routes
    from a2a.types.a2a_pb2 import AgentInterface

    from net.test_wire_cli import HttpsServer
    from tamesu.suite.secrets import Redactor
    from tamesu.suite.templates import Context
    from tamesu.targets.a2a.checkup import check

    ca = trustme.CA()  # nobody's: neither the platform's store nor a ca_file has it
    leaf = ca.issue_cert("shop.internal")  # and a name that is not the address dialled
    server = grpc.aio.server()
    chain = b"".join(pem.bytes() for pem in leaf.cert_chain_pems)
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(leaf.private_key_pem.bytes(), chain)]))
    card = agents.card("grpc")
    del card.supported_interfaces[:]
    card.supported_interfaces.append(AgentInterface(url=f"grpcs://127.0.0.1:{port}", protocol_binding="GRPC",
                                                    protocol_version="1.0"))
    async with httpx.AsyncClient(timeout=5) as push:
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(agents._handler(card, push, extended=card)), server)
        await server.start()
        try:
            with HttpsServer(Starlette(routes=create_agent_card_routes(card)), ca, tmp_path) as origin:
                session = make_session(tmp_path)
                spec = {"url": origin, "tls": {"verify": False}, "connect": {"attempts": 1}, "turn_timeout": "5s"}
                async with opened(spec, session) as target:
                    first = await target.send(UserTurn(text="ping"))
                    second = await target.send(UserTurn(text="ping"))
                assert (first.text, second.text) == ("pong", "pong")
                assert events(session, "transport")[0]["url"] == f"grpcs://127.0.0.1:{port}"
                # doctor probes the channel a run takes (it probed with the certificate checked: "failed")
                fine, words = await check(A2ASpec.model_validate({"type": "a2a", **spec}), "shop", Context(),
                                          Redactor(), tmp_path)
                assert fine is True and words.endswith(
                    f"a run speaks GRPC 1.0 at grpcs://127.0.0.1:{port}: gRPC channel ready (TCP, TLS with the "
                    "certificate not checked, HTTP/2); it offers no health service (grpc.health.v1)"), words
                # and the grpcs:// url written as the target's (it was refused where written)
                async with opened({**spec, "url": f"grpcs://127.0.0.1:{port}"}, make_session(tmp_path)) as target:
                    assert (await target.send(UserTurn(text="ping"))).text == "pong"
                # an agent the relay cannot reach is said as such, not as the relay's socket closing
                await server.stop(None)
                with pytest.raises(InfraError, match=rf"cannot reach grpcs://127.0.0.1:{port}, the GRPC interface the "
                                                     rf"agent card gives for url {origin}, after 1 attempt: TLS "
                                                     rf"\(certificate not checked\) to 127.0.0.1:{port}: .*refused"):
                    async with opened(spec, make_session(tmp_path)) as target:
                        await target.send(UserTurn(text="ping"))
        finally:
            await server.stop(None)
