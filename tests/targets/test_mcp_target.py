"""The mcp target against real MCP servers (child processes, over stdio and streamable HTTP), driven by the
fake model: tools listed and offered, calls recorded, allow_tools, call_timeout, crashes, tool errors,
fuzz_tools, grounding on a tool's results, and the example suite through the `tamesu` command."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from forked import script_command, script_python
from lifeline import tied
from model_servers import OpenAIServer, text, tool_call
from ports import refused_port
from sdk_groups import IN_PROCESS_MCP
from sessions import events
from tamesu.checks import parse_assertion
from tamesu.checks.base import Exchange, RunView
from tamesu.conversation import Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.fuzzing import DEFAULT_ERROR, HOSTILE_TEXT, FuzzSpec
from tamesu.models.client import ModelRegistry
from tamesu.models.spec import ModelSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import Context
from tamesu.targets import target_class
from tamesu.targets.mcp.target import SYSTEM_PROMPT_VERSION, McpTarget, McpTargetSpec
from tamesu.targets.model import ModelTarget, ModelTargetSpec

pytestmark = IN_PROCESS_MCP  # most tests here open the target in this process
ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).resolve().parents[1] / "agents" / "mcp_servers.py"
EXAMPLE = ROOT / "examples" / "mcp-server"
PYTHON = sys.executable

# The fake model that drives the tools: the user's words pick the calls.
RULES: list[dict[str, Any]] = [
    {"when": "where is ORD-1001", "tool_calls": [{"name": "get_order", "args": {"order_id": "ORD-1001"}}],
     "say": "ORD-1001 has shipped and arrives Friday."},
    {"when": "where is ORD-9999", "tool_calls": [{"name": "get_order", "args": {"order_id": "ORD-9999"}}],
     "say": "I could not find that order."},
    {"when": "refund", "tool_calls": [{"name": "refund_order", "args": {"order_id": "ORD-1001"}}],
     "say": "I can't do refunds."},
    {"when": "returns", "tool_calls": [{"name": "search_docs", "args": {"query": "returns"}}],
     "say": "You can return items within 30 days of delivery."},
    {"when": "wait", "tool_calls": [{"name": "hang"}], "say": "The system is slow, please try later."},
    {"when": "ghost", "tool_calls": [{"name": "ghost"}, {"name": "teleport", "args": {"to": "moon"}}],
     "say": "Neither worked."},
    {"when": "crash", "tool_calls": [{"name": "crash"}], "say": "unreachable"},
    {"when": "env", "tool_calls": [{"name": "read_env", "args": {"name": "SHOP_TOKEN"}},
                                   {"name": "read_env", "args": {"name": "TAMESU_NOT_PASSED"}}], "say": "read"},
    {"when": "hello", "say": "Hello! How can I help?"},
]


def make_session(tmp_path: Path, *, rules: list[dict[str, Any]] | None = None,
                 fuzz: dict[str, Any] | None = None, secrets: dict[str, str] | None = None) -> Session:
    store = Secrets(environ=secrets or {})
    models = ModelRegistry({"target": ModelSpec(provider="fake", rules=rules or RULES),
                            "judge": ModelSpec(provider="fake", rules=GROUNDED_RULES)})
    session = Session(context=Context(vars={}, captured={}, secrets=store, env=dict(os.environ)),
                      artifacts_dir=tmp_path / "run", redactor=store.redactor, run_id="t",
                      base_dir=SERVERS.parent, models=models)
    if fuzz is not None:
        # What the engine does with a test's `fuzz_tools` (see the report of issue 7).
        session.fuzz_tools = {name: FuzzSpec.model_validate(spec) for name, spec in fuzz.items()}  # type: ignore[attr-defined]
    return session


def stdio(*extra: str, **spec: Any) -> dict[str, Any]:
    # a fork of a warm process that has imported the MCP SDK (tests/forked.py): each `python mcp_servers.py`
    # spent some 1.5 s of CPU importing it, most of this module's time
    command, *args = script_command(SERVERS, *extra)
    return {"type": "mcp", "command": command, "args": args, **spec}


CALL_TIMEOUT = "5s"
"""call_timeout of a test whose slow call must time out and whose other calls must not: 0.5 s, then 1-2 s, were
taken by a loaded machine's real calls."""
START_TIMEOUT = "60s"
"""connect.timeout of every test that is not about it. The default 10 s ran out in a CI run at load: a niced worker
and the server it forks (tests/conftest.py's BACKGROUND_NICE) beside busy lanes took longer than that to start and
answer the handshake (reproduced with two CPU burners: 7 of 46 tests 'no answer to the MCP handshake within 10s')."""


@asynccontextmanager
async def opened(session: Session, **spec: Any) -> AsyncIterator[McpTarget]:
    spec["connect"] = {"timeout": START_TIMEOUT, **spec.get("connect", {})}
    target = McpTarget(McpTargetSpec.model_validate(spec), "shop")
    try:
        await target.open(session)
        yield target
    finally:
        await target.close()
        assert session.models is not None
        await session.models.aclose()  # type: ignore[attr-defined]


def calls_logged(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


# -- the spec -----------------------------------------------------------------------------------------------


def test_the_spec_says_what_is_missing_or_misplaced() -> None:
    problems = {
        "needs command (a server over stdio) or url": {},
        "args and env go with command": {"url": "http://x/mcp", "args": ["a"]},
        "headers go with url": {"command": "srv", "headers": {"A": "b"}},
        "tools come from its server": {"command": "srv", "tools": [{"name": "x"}]},
        "call_timeout must be more than 0": {"command": "srv", "call_timeout": 0},
        # before: validate said ok, the run "args: {{session.port}} has no value", exit 3
        "{{session.port}} is the free port of a server tamesu starts and reaches over HTTP: it needs both command "
        "and url": {"command": "srv", "args": ["--port", "{{session.port}}"]},
    }
    for message, spec in problems.items():
        with pytest.raises(ValidationError, match=re.escape(message)):
            McpTargetSpec.model_validate({"type": "mcp", **spec})
    spec = McpTargetSpec.model_validate({"type": "mcp", "command": "srv", "call_timeout": "1500ms",
                                         "allow_tools": ["get_*"], "model": "fake", "max_tool_rounds": 2})
    assert spec.call_timeout == 1.5 and spec.transport == "stdio"
    assert target_class("mcp") is McpTarget


# -- over stdio ---------------------------------------------------------------------------------------------


async def test_tools_are_listed_offered_called_and_recorded(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    session = make_session(tmp_path)
    async with opened(session, **stdio("--log", str(log))) as target:
        turn = await target.send(UserTurn(text="Hi, where is ORD-1001?"))
        server = events(session, "mcp_server")[0]
        system = target._messages[0].content
    assert turn.text == "ORD-1001 has shipped and arrives Friday."
    [call] = turn.tool_calls
    assert call.name == "get_order" and call.args == {"order_id": "ORD-1001"}
    assert call.result == {"order_id": "ORD-1001", "status": "shipped", "eta": "Friday"}  # the JSON text, parsed
    assert calls_logged(log) == ["get_order"]
    assert server["transport"] == "stdio" and server["server"] == "testshop"
    assert {"get_order", "search_docs", "ghost"} <= set(server["tools"]) and server["offered"] == [
        "search_docs", "get_order", "refund_order", "hang", "crash", "read_env", "ghost"]
    assert server["system"] == SYSTEM_PROMPT_VERSION and server["instructions"] is True
    assert 'MCP server "testshop"' in system and "Always look an order up" in system
    assert events(session, "transport")[0]["tools"] == server["offered"]
    [result] = events(session, "tool_result")
    assert result["outcome"] == "ok" and result["result"]["content"][0]["type"] == "text"
    assert events(session, "tool_call") == [{"tool": "get_order", "args": {"order_id": "ORD-1001"}}]
    assert target.metrics()["mcp_tool_calls"] == 1 and target.metrics()["model_calls"] == 2


async def test_a_users_system_prompt_replaces_tamesus_and_keeps_the_servers_instructions(tmp_path: Path) -> None:
    session = make_session(tmp_path, secrets={"SHOP": "Acme"})
    async with opened(session, **stdio(), system="You are Bob at {{secrets.SHOP}}.") as target:
        system = target._messages[0].content
    assert events(session, "mcp_server")[0]["system"] == "system"
    assert system == ("You are Bob at Acme.\n\nThe server's instructions:\n"
                      "Always look an order up before talking about it.")


async def test_a_template_that_cannot_be_rendered_fails_the_start(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    with pytest.raises(InfraError, match="mcp target shop: env: secret NOPE is not set"):
        async with opened(session, **stdio(env={"X": "{{secrets.NOPE}}"})):
            pass


async def test_env_reaches_the_server_and_nothing_else_of_ours(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAMESU_NOT_PASSED", "leak")
    session = make_session(tmp_path, secrets={"SHOP_TOKEN": "s3cret-token"})
    async with opened(session, **stdio(env={"SHOP_TOKEN": "{{secrets.SHOP_TOKEN}}"})) as target:
        turn = await target.send(UserTurn(text="env please"))
    assert [c.result for c in turn.tool_calls] == ["s3cret-token", "<unset>"]


@pytest.mark.parametrize("http", [False, True], ids=["stdio", "command and url"])
async def test_the_servers_log_is_masked_as_it_is_written(tmp_path: Path, http: bool) -> None:
    """mcp-server.log was the server's stderr itself, masked when the target closed: while the run ran, and for
    good once tamesu was killed (SIGKILL, a second Ctrl-C), it held the token the server printed."""
    session = make_session(tmp_path, secrets={"SHOP_TOKEN": "s3cret-token-77"})
    log = tmp_path / "run" / "mcp-server.log"
    where = {"url": "http://127.0.0.1:{{session.port}}/mcp"} if http else {}
    extra = ("--http", "--port", "{{session.port}}") if http else ()
    async with opened(session, **stdio(*extra, "--say-env", "SHOP_TOKEN"),
                      env={"SHOP_TOKEN": "{{secrets.SHOP_TOKEN}}"}, **where):
        async with asyncio.timeout(60):
            while "SHOP_TOKEN=" not in log.read_text(encoding="utf-8"):
                await asyncio.sleep(0.05)  # the server's line is on its way through the pipe
        assert "s3cret-token-77" not in log.read_text(encoding="utf-8")
        assert "SHOP_TOKEN=***" in log.read_text(encoding="utf-8").splitlines()
    assert "SHOP_TOKEN=***" in log.read_text(encoding="utf-8").splitlines()


async def test_allow_tools_narrows_the_offer_and_a_refused_call_never_reaches_the_server(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    session = make_session(tmp_path)
    async with opened(session, **stdio("--log", str(log), allow_tools=["get_*", "search_docs"])) as target:
        turn = await target.send(UserTurn(text="refund ORD-1001 please"))
        metrics = target.metrics()
    assert events(session, "mcp_server")[0]["offered"] == ["search_docs", "get_order"]
    [call] = turn.tool_calls
    assert call.name == "refund_order" and call.result == {"error": "no tool named refund_order"}
    assert calls_logged(log) == []
    assert events(session, "tool_result") == [
        {"tool": "refund_order", "outcome": "refused", "reason": "not in allow_tools", "ms": 0.0}]
    assert metrics["mcp_tools_refused"] == metrics["mcp_tool_calls"] == 1 and metrics["mcp_tool_errors"] == 0
    # the assertions see the attempt
    view = run_view(session, turn)
    assert not (await parse_assertion({"tool_not_called": "refund_order"}).check.evaluate(view)).passed


async def test_allow_tools_naming_no_tool_of_the_server_fails_the_start(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match=r"allow_tools names 'get_ordre', which the server does not offer "
                                         r"\(its tools: crash, get_order"):
        async with opened(make_session(tmp_path), **stdio(allow_tools=["get_ordre", "search_*"])):
            pass


async def test_a_server_that_crashes_at_start_is_an_infrastructure_error_with_its_stderr(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    started = time.monotonic()
    with pytest.raises(InfraError) as caught:
        async with opened(session, **stdio("crash")):
            pass
    message = str(caught.value)
    assert message.startswith("mcp target shop: the MCP server did not start: the server closed the connection")
    assert "its stderr ends with: boom: the database is unreachable" in message
    assert (tmp_path / "run" / "mcp-server.log").read_text().strip() == "boom: the database is unreachable"
    assert time.monotonic() - started < 50  # told when it exited, not when START_TIMEOUT ran out


async def test_a_command_that_does_not_exist_is_an_infrastructure_error(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match="cannot start the command: No such file or directory"):
        async with opened(make_session(tmp_path), type="mcp", command="./no-such-server"):
            pass


async def test_a_server_that_never_answers_fails_the_start_after_connect_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(InfraError, match=r"did not start: no answer to the MCP handshake within 1s "
                                         r"\(connect\.timeout\)"):
        async with opened(make_session(tmp_path), **stdio("mute", connect={"timeout": "1s"})):
            pass
    # the silent process was stopped (stdin closed, then SIGTERM, SIGKILL: some 3 s), not waited for (it sleeps an
    # hour); 60 s, as a loaded machine's niced worker may take many times that
    assert time.monotonic() - started < 60


async def test_a_server_over_http_that_never_answers_names_connect_timeout(tmp_path: Path, serve: Any) -> None:
    # before: "the MCP server cannot be reached: TimeoutError: no answer within 1s": it was reached, and the
    # line named no setting
    async def never(request: Any) -> None:
        await asyncio.Event().wait()  # holds the request until the client gives up

    from starlette.applications import Starlette
    from starlette.routing import Route

    site = serve(Starlette(routes=[Route("/mcp", never, methods=["GET", "POST", "DELETE"])]))
    with pytest.raises(InfraError) as caught:
        async with opened(make_session(tmp_path), type="mcp", url=f"{site.url}/mcp", connect={"timeout": "1s"}):
            pass
    assert str(caught.value) == ("mcp target shop: the MCP server did not answer: no answer to the MCP handshake "
                                 "within 1s (connect.timeout)")


async def test_a_call_that_hangs_is_answered_as_a_timeout_and_the_conversation_goes_on(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    # the call after the hung one is bound by call_timeout too: a loaded CI machine's server once took longer than
    # 0.5 s to answer it (its result was the timeout's error, not the order), hence CALL_TIMEOUT
    async with opened(session, **stdio(call_timeout=CALL_TIMEOUT)) as target:
        started = time.monotonic()
        slow = await target.send(UserTurn(text="wait for it"))
        took = time.monotonic() - started
        after = await target.send(UserTurn(text="where is ORD-1001"))
        metrics = target.metrics()
    assert 4.9 < took < 120  # the tool sleeps an hour: any bound far below that shows the timeout, loaded or not
    assert slow.tool_calls[0].result == {"error": "the tool did not answer within 5s"}
    assert slow.text == "The system is slow, please try later."
    assert after.tool_calls[0].result["status"] == "shipped"
    assert [e["outcome"] for e in events(session, "tool_result")] == ["timeout", "ok"]
    assert metrics["mcp_tool_timeouts"] == 1


async def test_a_tool_error_result_is_given_to_the_model_and_recorded(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened(session, **stdio()) as target:
        turn = await target.send(UserTurn(text="where is ORD-9999"))
        tool_message = target._messages[-2]
        metrics = target.metrics()
    error = {"error": "Error executing tool get_order: no order ORD-9999"}  # the SDK's wording of a ToolError
    assert turn.tool_calls[0].result == error
    assert tool_message.role == "tool" and json.loads(tool_message.content) == error
    assert turn.text == "I could not find that order."
    result = events(session, "tool_result")[0]
    assert result["outcome"] == "error" and result["result"]["is_error"] is True
    assert metrics["mcp_tool_errors"] == 1


async def test_unknown_tools_the_servers_and_the_models(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    session = make_session(tmp_path)
    async with opened(session, **stdio("--log", str(log))) as target:
        turn = await target.send(UserTurn(text="ghost and teleport"))
        metrics = target.metrics()
    ghost, teleport = turn.tool_calls
    # listed by the server, unknown to its handler: the server's own error, given to the model
    assert ghost.result == {"error": "Unknown tool: ghost"}
    # invented by the model: refused by tamesu, never sent
    assert teleport.result == {"error": "no tool named teleport"} and teleport.args == {"to": "moon"}
    assert [(e["tool"], e["outcome"]) for e in events(session, "tool_result")] == [
        ("ghost", "error"), ("teleport", "refused")]
    assert events(session, "tool_result")[1]["reason"] == "not offered by the server"
    assert calls_logged(log) == []
    assert metrics["mcp_tool_errors"] == 1 and metrics["mcp_tools_refused"] == 1


async def test_a_server_that_crashes_during_a_call_fails_the_turn(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened(session, **stdio()) as target:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="crash please"))
    message = str(caught.value)
    assert message.startswith("the MCP server went away when crash was called (did it crash?): "
                              "the server closed the connection")
    assert "fatal: the tool crashed the server" in message
    assert events(session, "tool_result")[-1]["outcome"] == "lost"


# -- over streamable HTTP -----------------------------------------------------------------------------------


@pytest.fixture
def http_server() -> Iterator[Callable[..., str]]:
    """Starts mcp_servers.py --http on a free port; every one is stopped when the test ends."""
    started: list[subprocess.Popen[str]] = []

    def start(*extra: str) -> str:
        process = subprocess.Popen(tied(script_command(SERVERS, "--http", "--port", "0", *extra)),
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()  # the server prints its address before it serves
        match = re.search(r"listening on (\S+)", line)
        assert match, f"the server did not start: {line!r}"
        return match.group(1)

    yield start
    for process in started:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()


async def test_a_running_server_at_a_url_with_headers(tmp_path: Path, http_server: Callable[..., str]) -> None:
    url = http_server("--token", "t0ken")
    session = make_session(tmp_path, secrets={"MCP_TOKEN": "t0ken"})
    async with opened(session, type="mcp", url=url,
                      headers={"Authorization": "Bearer {{secrets.MCP_TOKEN}}"}) as target:
        turn = await target.send(UserTurn(text="where is ORD-1001"))
    assert turn.tool_calls[0].result["status"] == "shipped"
    assert events(session, "mcp_server")[0]["transport"] == "http"


async def test_a_server_of_the_older_sse_transport_is_named_as_such(tmp_path: Path,
                                                                    http_server: Callable[..., str]) -> None:
    # before: "Server returned an error response (HTTP 405 Method Not Allowed)" and nothing on why
    url = http_server("--sse")
    session = make_session(tmp_path)
    with pytest.raises(InfraError) as failed:
        async with opened(session, type="mcp", url=url, connect={"attempts": 1}):
            pass
    assert "(HTTP 405 Method Not Allowed; a server that refuses the POST may speak only MCP's older HTTP+SSE " \
        "transport (a url ending in /sse), which tamesu does not: give its streamable HTTP endpoint (often /mcp))" \
        in str(failed.value), str(failed.value)


async def test_a_url_the_server_redirects_within_itself_is_followed(tmp_path: Path,
                                                                    http_server: Callable[..., str]) -> None:
    # before: `.../mcp/` (Starlette answers 307 to `.../mcp`, as a trailing slash is normalised) failed the start
    # with "RequestNotRead: Attempted to access streaming request content": the redirected request, which the SDK
    # rebuilds to follow it within the origin, was read as one that had its body in hand
    url = http_server()
    session = make_session(tmp_path)
    async with opened(session, type="mcp", url=f"{url}/") as target:
        turn = await target.send(UserTurn(text="where is ORD-1001"))
    assert turn.tool_calls[0].result["status"] == "shipped"


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_an_answer_past_max_response_bytes_is_refused_and_fails_the_turn(
        tmp_path: Path, http_server: Callable[..., str], transport: str) -> None:
    """The same refusal over both transports: over stdio tamesu reads the server's stdout itself and holds no
    line past the limit (and the JSON-RPC envelope's room), `test_mcp_stdio_size.py` has the 400 MB line."""
    where = {"url": http_server()} if transport == "http" else stdio()
    rules = [{"when": "everything", "tool_calls": [{"name": "search_docs", "args": {"query": "everything"}}],
              "say": "unreachable"}, *RULES]
    session = make_session(tmp_path, rules=rules)
    async with opened(session, **{"type": "mcp", **where, "max_response_bytes": 100_000}) as target:
        small = await target.send(UserTurn(text="where is ORD-1001"))  # under the limit, read as always
        with pytest.raises(TurnError) as refused:
            await target.send(UserTurn(text="tell me everything"))
    assert small.tool_calls[0].result["status"] == "shipped"
    # the SDK ends its session when the transport refuses an answer: the turn says why, not "did it crash?"
    assert str(refused.value).startswith("the answer of search_docs was refused: the answer was larger than "
                                         "max_response_bytes (100,000): read "), refused.value
    [cut] = events(session, "response_truncated")
    assert cut["limit"] == 100_000 and cut["complete"] is False
    assert events(session, "tool_result")[-1]["outcome"] == "too_large"


async def test_a_429_from_the_server_is_waited_out_and_said(tmp_path: Path, http_server: Callable[..., str]) -> None:
    # before: the SDK's first request (initialize) failed, "cannot be reached ... HTTP 429", exit 3
    url = http_server("--limit", "2")
    session = make_session(tmp_path)
    async with opened(session, type="mcp", url=url, connect={"backoff": "50ms"}) as target:
        turn = await target.send(UserTurn(text="where is ORD-1001"))
    assert turn.tool_calls[0].result["status"] == "shipped"
    limited = events(session, "rate_limited")
    assert [(e["attempt"], e["retry_after_s"], e["wait_s"], e["url"]) for e in limited] == \
        [(1, 0.1, 0.1, url), (2, 0.1, 0.1, url)]


async def test_a_server_still_limiting_after_the_retries_is_asked_rate_limit_retries_times(
        tmp_path: Path, http_server: Callable[..., str]) -> None:
    # before: the SDK's next request after the failed initialize was waited out as many times again (4 events, and
    # their waits, for rate_limit_retries: 2)
    url = http_server("--limit", "100")
    session = make_session(tmp_path)
    with pytest.raises(InfraError, match=r"cannot be reached: .*HTTP 429"):
        async with opened(session, type="mcp", url=url, connect={"backoff": "50ms"}, rate_limit_retries=2):
            pass
    assert [e["attempt"] for e in events(session, "rate_limited")] == [1, 2]


async def test_a_server_that_refuses_the_headers_is_an_infrastructure_error(
        tmp_path: Path, http_server: Callable[..., str]) -> None:
    # before: "the MCP server cannot be reached: MCP error -32603: Server returned an error response (HTTP 401
    # Unauthorized)": it was reached, and refused the token; neither the url nor what to check was said
    url = http_server("--token", "t0ken")
    with pytest.raises(InfraError) as failed:
        async with opened(make_session(tmp_path), type="mcp", url=url, headers={"Authorization": "Bearer nope"}):
            pass
    assert str(failed.value) == (f"mcp target shop: the MCP server at {url} refused the session's start (initialize): "
                                 "HTTP 401 Unauthorized: check the target's headers (a token?)")


async def test_an_unreachable_url_is_tried_connect_attempts_times(tmp_path: Path) -> None:
    port = refused_port()
    session = make_session(tmp_path)
    with pytest.raises(InfraError) as failed:
        async with opened(session, type="mcp", url=f"http://127.0.0.1:{port}/mcp",
                          connect={"attempts": 3, "backoff": "50ms"}):
            pass
    # before: "the MCP server cannot be reached: cannot connect (...)": neither the url (a template's, often) nor
    # the attempts, which the grpc and a2a targets say
    assert str(failed.value).startswith(f"mcp target shop: the MCP server at http://127.0.0.1:{port}/mcp cannot be "
                                        "reached after 3 attempts: cannot connect ("), str(failed.value)
    assert [e["attempt"] for e in events(session, "connect_retry")] == [1, 2]


async def test_command_and_url_start_the_server_on_a_free_port_and_stop_it(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened(session, **stdio("--http", "--port", "{{session.port}}"),
                      url="http://127.0.0.1:{{session.port}}/mcp") as target:
        turn = await target.send(UserTurn(text="where is ORD-1001"))
    url = events(session, "mcp_server")[0]["url"]
    port = int(re.fullmatch(r"http://127\.0\.0\.1:(\d+)/mcp", url).group(1))  # type: ignore[union-attr]
    assert turn.tool_calls[0].result["status"] == "shipped"
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass  # stopped with the session


async def test_a_started_http_server_that_exits_is_an_infrastructure_error(tmp_path: Path) -> None:
    with pytest.raises(InfraError, match=r"exited with code 3 before it listened; its stderr ends with: boom"):
        async with opened(make_session(tmp_path), **stdio("crash"), url="http://127.0.0.1:{{session.port}}/mcp"):
            pass


# -- fuzz_tools -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "expected"), [
    ("error", {"error": DEFAULT_ERROR}),
    ({"mode": "error", "message": "rate limited"}, {"error": "rate limited"}),
    ("empty", ""),
    ("hostile", HOSTILE_TEXT),
    ({"mode": "custom", "data": {"status": "lost at sea"}}, {"status": "lost at sea"}),
    ({"mode": "custom", "text": "ORD-1001: cancelled"}, "ORD-1001: cancelled"),
])
async def test_a_fuzzed_tool_answers_as_its_mode_says_without_calling_the_server(
        tmp_path: Path, mode: Any, expected: Any) -> None:
    log = tmp_path / "calls.log"
    session = make_session(tmp_path, fuzz={"get_order": mode})
    async with opened(session, **stdio("--log", str(log))) as target:
        turn = await target.send(UserTurn(text="where is ORD-1001"))
    assert turn.tool_calls[0].result == expected
    assert calls_logged(log) == []
    kind = mode if isinstance(mode, str) else mode["mode"]
    assert events(session, "tool_fuzzed") == [{"tool": "get_order", "mode": kind}]
    assert events(session, "tool_result")[0]["outcome"] == "fuzzed"
    assert session.counters["tools_fuzzed"] == 1


async def test_fuzz_tools_naming_no_tool_of_the_server_fails_the_start(tmp_path: Path) -> None:
    # before: the misspelt name matched nothing, the real tool answered, and "get_order is down" passed untested
    with pytest.raises(InfraError, match=r"fuzz_tools names 'get_ordre', which the server does not offer "
                                         r"\(its tools: crash, get_order"):
        async with opened(make_session(tmp_path, fuzz={"get_ordre": "error"}), **stdio()):
            pass


async def test_fuzz_tools_naming_a_tool_allow_tools_withholds_fails_the_start(tmp_path: Path) -> None:
    # before: the tool was never offered, so never called, never fuzzed: "get_order is down" passed untested
    with pytest.raises(InfraError, match=r"fuzz_tools names 'get_order', which allow_tools does not offer the "
                                         r"model, so it would never misbehave"):
        async with opened(make_session(tmp_path, fuzz={"get_order": "error"}), allow_tools=["search_*"],
                          **stdio()):
            pass


async def test_a_delayed_tool_answers_late_or_times_out(tmp_path: Path) -> None:
    # the late call's 300 ms and its real call must fit in call_timeout on a loaded machine too (before: 1 s, and
    # 2 s for the delay that must not: CALL_TIMEOUT, and a delay that no load brings within it)
    session = make_session(tmp_path, fuzz={"get_order": {"mode": "delay", "delay": "300ms"},
                                           "search_docs": {"mode": "delay", "delay": "10m"}})
    async with opened(session, **stdio(call_timeout=CALL_TIMEOUT)) as target:
        started = time.monotonic()
        late = await target.send(UserTurn(text="where is ORD-1001"))
        assert time.monotonic() - started >= 0.3
        timed_out = await target.send(UserTurn(text="returns policy?"))
    assert late.tool_calls[0].result["status"] == "shipped"
    # call_timeout bounds the delay and the real call together, as a host waits for a slow tool
    assert timed_out.tool_calls[0].result == {"error": "the tool did not answer within 5s"}
    assert [e["outcome"] for e in events(session, "tool_result")] == ["ok", "timeout"]
    assert target.metrics()["mcp_tool_timeouts"] == 1
    # the docs' `metric: {name: mcp_tool_errors, equals: 0}` sees it: before, it read 0 and passed
    assert target.metrics()["mcp_tool_errors"] == 1


def test_fuzz_options_that_do_not_fit_their_mode_are_refused() -> None:
    for spec, message in [({"mode": "empty", "message": "x"}, "message does not apply to mode empty"),
                          ({"mode": "custom"}, "mode custom needs text or data"),
                          ("explode", "Input should be 'error', 'empty', 'hostile', 'delay' or 'custom'")]:
        with pytest.raises(ValidationError, match=message):
            FuzzSpec.model_validate(spec)
    assert FuzzSpec.model_validate("delay").hold_seconds() == 5.0


async def test_the_model_target_fuzzes_its_declared_tools_too(tmp_path: Path) -> None:
    rules = [{"when": "order", "tool_calls": [{"name": "lookup", "args": {"id": "1"}}], "say": "done"}]
    session = make_session(tmp_path, rules=rules, fuzz={"lookup": "hostile"})
    target = ModelTarget(ModelTargetSpec.model_validate(
        {"type": "model", "tools": [{"name": "lookup", "result": {"ok": True}}]}), "bot")
    await target.open(session)
    try:
        turn = await target.send(UserTurn(text="my order"))
    finally:
        await target.close()
        await session.models.aclose()  # type: ignore[union-attr]
    assert turn.tool_calls[0].result == HOSTILE_TEXT
    assert events(session, "tool_fuzzed") == [{"tool": "lookup", "mode": "hostile"}]


async def test_arguments_that_are_no_json_reach_no_tool_and_the_model_is_told(tmp_path: Path, serve: Any) -> None:
    # before: the model's broken JSON became {"_raw": ...}, sent on to the server's tool as its arguments
    model = OpenAIServer()
    base_url = model.base_url(serve(model.app).url)
    model.plan(tool_call("get_order", '{"order_id": "ORD-1001"'), text("Let me try again."),
               tool_call("lookup", '{"id": '), text("Sorry."))
    session = make_session(tmp_path)
    session.models = ModelRegistry({"target": ModelSpec(provider="openai", model="test-model", base_url=base_url,
                                                        api_key="local", timeout=10)})
    log = tmp_path / "calls.log"
    async with opened(session, **stdio("--log", str(log))) as target:
        turn = await target.send(UserTurn(text="where is ORD-1001?"))
    assert calls_logged(log) == []
    [call] = turn.tool_calls
    assert call.name == "get_order" and call.args == {}
    assert call.result["error"].startswith("the arguments were not valid JSON (")
    [told] = [m for m in model.requests[1].body["messages"] if m["role"] == "tool"]
    assert told["content"] == json.dumps(call.result)
    # the model is shown its call as it wrote it
    assert model.requests[1].body["messages"][-2]["tool_calls"][0]["function"]["arguments"] == \
        '{"order_id": "ORD-1001"'
    [invalid] = events(session, "tool_arguments_invalid")
    assert invalid == {"tool": "get_order", "arguments": '{"order_id": "ORD-1001"', "error": call.result["error"]
                       .split("; the tool was not called")[0]}
    assert session.counters["tool_arguments_invalid"] == 1 and events(session, "tool_call") == []

    session = make_session(tmp_path)
    session.models = ModelRegistry({"target": ModelSpec(provider="openai", model="test-model", base_url=base_url,
                                                        api_key="local", timeout=10)})
    target = ModelTarget(ModelTargetSpec.model_validate(
        {"type": "model", "tools": [{"name": "lookup", "result": {"ok": True}}]}), "bot")
    await target.open(session)
    try:
        turn = await target.send(UserTurn(text="my order"))
    finally:
        await target.close()
        await session.models.aclose()
    assert turn.tool_calls[0].result != {"ok": True} and turn.tool_calls[0].args == {}
    assert [e["tool"] for e in events(session, "tool_arguments_invalid")] == ["lookup"]


async def test_a_tool_without_arguments_listed_as_a_bare_object_reaches_an_openai_model(tmp_path: Path,
                                                                                        serve: Any) -> None:
    # before: the server's `ghost` ({"type": "object"}, as MCP allows and many servers list a tool without
    # arguments) went to OpenAI as it was, which refuses the whole request: every turn of every test of such a
    # server was exit 3 "Invalid schema for function 'ghost': In context=(), object schema missing properties."
    model = OpenAIServer(strict_tools=True)
    base_url = model.base_url(serve(model.app).url)
    model.plan(text("Hello! How can I help?"), text("Pong."))
    session = make_session(tmp_path)
    session.models = ModelRegistry({"target": ModelSpec(provider="openai", model="test-model", base_url=base_url,
                                                        api_key="local", timeout=10)})
    async with opened(session, **stdio()) as target:
        turn = await target.send(UserTurn(text="hello"))
    assert turn.text == "Hello! How can I help?"
    [asked] = model.calls()
    offered = {tool["function"]["name"]: tool["function"]["parameters"] for tool in asked.body["tools"]}
    assert offered["ghost"] == {"type": "object", "properties": {}}
    assert offered["get_order"]["properties"] == {"order_id": {"title": "Order Id", "type": "string"}}
    # a model target's own declarations: an object schema without properties, properties without a type
    session = make_session(tmp_path)
    session.models = ModelRegistry({"target": ModelSpec(provider="openai", model="test-model", base_url=base_url,
                                                        api_key="local", timeout=10)})
    target = ModelTarget(ModelTargetSpec.model_validate({"type": "model", "tools": [
        {"name": "ping", "parameters": {"type": "object"}},
        {"name": "echo", "parameters": {"properties": {"text": {"type": "string"}}}}]}), "bot")
    await target.open(session)
    try:
        assert (await target.send(UserTurn(text="ping"))).text == "Pong."
    finally:
        await target.close()
        await session.models.aclose()
    offered = {tool["function"]["name"]: tool["function"]["parameters"] for tool in model.calls()[1].body["tools"]}
    assert offered == {"ping": {"type": "object", "properties": {}},
                       "echo": {"type": "object", "properties": {"text": {"type": "string"}}}}


# -- grounding on an MCP tool -------------------------------------------------------------------------------

GROUNDED_RULES: list[dict[str, Any]] = [
    {"check": "grounded", "context": "within 30 days", "transcript": "30 days", "pass": True,
     "reason": "the return window comes from search_docs"},
    {"check": "grounded", "pass": False, "reason": "unsupported"},
]


def run_view(session: Session, *turns: Any) -> RunView:
    exchanges = [Exchange(i, UserTurn(text="..."), turn) for i, turn in enumerate(turns, start=1)]
    return RunView(exchanges=exchanges, metrics={}, captured={}, events=session.events,
                   tool_calls=[c for turn in turns for c in turn.tool_calls], context=session.context,
                   base_dir=session.base_dir, models=session.models)


async def test_grounded_reads_the_context_from_an_mcp_tools_results(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened(session, **stdio()) as target:
        turn = await target.send(UserTurn(text="what is your returns policy?"))
        view = run_view(session, turn)
        grounded = parse_assertion({"grounded": {"context": {"tool": "search_docs"}}}).check
        verdict = await grounded.evaluate(view)
        unrelated = await parse_assertion({"grounded": {"context": {"tool": "get_order"}}}).check.evaluate(view)
    assert verdict.passed and "search_docs" in verdict.reason
    assert not unrelated.passed and "tool get_order was not called" in unrelated.reason


# -- the example, through the command -------------------------------------------------------------------------


def _example_env(folder: Path) -> dict[str, str]:
    """`command: python` in the example means the Python of tamesu's environment, as in an activated venv; here
    a `python` first on PATH that runs `python server.py ...` as a fork of the warm process that has imported
    the MCP SDK (tests/forked.py: 1.5 s of CPU less per server)."""
    shim = folder / "bin" / "python"
    shim.parent.mkdir(parents=True)
    shim.write_text("#!/bin/sh\nexec " + " ".join(map(shlex.quote, script_python())) + ' "$@"\n')
    shim.chmod(0o755)
    # the run's history too goes into `folder`: by default it is kept beside the example's tamesu.yaml
    return {"PATH": os.pathsep.join([str(shim.parent), str(Path(PYTHON).parent), os.environ.get("PATH", "")]),
            "TAMESU_STORE": str(folder / "store.db")}




def _example_suite(folder: Path, name: str) -> Path:
    """The example, copied, its targets given START_TIMEOUT to start in: as shipped (connect.timeout's 10 s) it
    failed on a loaded machine with 'no answer to the MCP handshake within 10s' and 'did not listen at its url
    within 10s' (the server had printed its address)."""
    copy = folder / "example"
    shutil.copytree(EXAMPLE, copy)
    suite = yaml.safe_load((copy / name).read_text(encoding="utf-8"))
    for target in suite["targets"].values():
        assert "connect" not in target, "the example now sets connect: keep its other keys here"
        target["connect"] = {"timeout": START_TIMEOUT}
    (copy / name).write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")
    return copy / name


def test_the_example_suite_passes_over_stdio_and_streamable_http(tmp_path: Path, tamesu: Any) -> None:
    done = tamesu(["run", str(_example_suite(tmp_path, "shop.tamesu.yaml")), "--out", str(tmp_path / "out")], cwd=ROOT,
                  env=_example_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 passed, 0 failed" in done.stdout
    [run_dir] = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    results = {json.loads(line)["test"]: json.loads(line) for line in
               (run_dir / "results.jsonl").read_text().splitlines()}
    assert set(results) == {"order status", "product search", "refunds are not offered",
                            "order status over http", "product search over http"}
    http = json.loads((run_dir / "mcp-shop" / "order-status-over-http" / "run-1" / "result.json").read_text())
    assert next(e for e in http["events"] if e["name"] == "mcp_server")["data"]["transport"] == "http"
    assert http["tool_calls"][0]["result"]["carrier"] == "DHL"


def test_the_example_fuzzed_suite_passes(tmp_path: Path, tamesu: Any) -> None:
    done = tamesu(["run", str(_example_suite(tmp_path, "fuzz.tamesu.yaml")), "--out", str(tmp_path / "out")], cwd=ROOT,
                  env=_example_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 0 failed" in done.stdout


def test_a_server_that_crashes_at_start_exits_3_through_the_command(tmp_path: Path, tamesu: Any) -> None:
    shutil.copy(SERVERS, tmp_path / "servers.py")
    python, *args = script_python()  # a fork of the warm process (tests/forked.py)
    (tmp_path / "tamesu.yaml").write_text("models:\n  target: { provider: fake, rules: [{ say: hi }] }\n")
    (tmp_path / "crash.tamesu.yaml").write_text(
        "targets:\n"
        f"  broken: {{ type: mcp, command: {json.dumps(python)}, args: {json.dumps([*args, 'servers.py', 'crash'])} "
        "}\n"
        "tests:\n"
        "  - name: says hello\n"
        "    target: broken\n"
        "    scenario: { script: [{ say: hello }] }\n"
        "    assert: [{ contains: hi }]\n")
    done = tamesu(["run", "--out", str(tmp_path / "runs")], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "boom: the database is unreachable" in done.stdout


async def test_closing_twice_and_after_a_failed_open_is_safe(tmp_path: Path) -> None:
    target = McpTarget(McpTargetSpec.model_validate(stdio("crash")), "shop")
    session = make_session(tmp_path)
    with pytest.raises(InfraError):
        await target.open(session)
    await target.close()
    await target.close()
    await asyncio.sleep(0)
    await session.models.aclose()  # type: ignore[union-attr]
