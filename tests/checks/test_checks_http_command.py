"""`http` against a real local server and `command` with real shell commands."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from checks.grading import fails, passes, problem, verdict
from conftest import run_tamesu
from ports import refused_port
from tamesu.checks.base import Exchange, RunView
from tamesu.conversation import AgentTurn, UserTurn
from tamesu.errors import InfraError, SuiteProblem
from tamesu.net.serve import ThreadServer
from tamesu.suite.templates import Context

ORDERS = {"ORD-1": {"id": "ORD-1", "status": "refunded", "items": [1, 2, 3]}}


async def order(request: Request) -> Response:
    found = ORDERS.get(request.path_params["order_id"])
    return JSONResponse(found) if found else JSONResponse({"error": "not found"}, status_code=404)


async def echo(request: Request) -> Response:
    raw = (await request.body()).decode()
    return JSONResponse({
        "method": request.method,
        "authorization": request.headers.get("authorization"),
        "content_type": request.headers.get("content-type"),
        "body": raw,
    })


async def text(request: Request) -> Response:
    return PlainTextResponse("all systems nominal")


SLOW_SECONDS = 10.0


async def slow(request: Request) -> Response:
    # answers after SLOW_SECONDS, far beyond the check's timeout, or stops when the caller has given up (so
    # the module's server shuts down at once)
    deadline = time.monotonic() + SLOW_SECONDS
    while time.monotonic() < deadline and not await request.is_disconnected():
        await asyncio.sleep(0.05)
    return PlainTextResponse("late")


async def trickle(request: Request) -> Response:
    # a byte every 50 ms for SLOW_SECONDS: never a read long enough to be a timeout of httpx's (each is per read)
    async def body() -> AsyncIterator[bytes]:
        deadline = time.monotonic() + SLOW_SECONDS
        while time.monotonic() < deadline:
            yield b"."
            await asyncio.sleep(0.05)
    return StreamingResponse(body(), media_type="text/plain")


async def moved(request: Request) -> Response:
    return RedirectResponse("/orders/ORD-1", status_code=307)


async def endless(request: Request) -> Response:
    # a backend endpoint that streams for ever (a log tail, an export): 1 MB pieces until the caller stops
    async def body() -> AsyncIterator[bytes]:
        piece = b"x" * 1_000_000
        while not await request.is_disconnected():
            yield piece
    return StreamingResponse(body(), media_type="text/plain")


APP = Starlette(routes=[
    Route("/endless", endless),
    Route("/moved", moved),
    Route("/trickle", trickle),
    Route("/orders/{order_id}", order),
    Route("/echo", echo, methods=["GET", "POST", "PUT"]),
    Route("/text", text),
    Route("/slow", slow),
])


@pytest.fixture(scope="module")
def backend() -> Iterator[str]:
    with ThreadServer(APP) as server:
        yield server.url


def run_with(base: str = "", tmp: Path | None = None, **captured: Any) -> RunView:
    variables = {"admin_url": base}
    return RunView(
        exchanges=[Exchange(1, UserTurn(text="refund it"), AgentTurn(text="done"))],
        metrics={},
        captured=captured,
        events=[],
        tool_calls=[],
        context=Context(captured=captured, vars=variables, secrets={"TOKEN": "s3cret"}),
        base_dir=tmp or Path.cwd(),
        vars=variables,
    )


# ---------------------------------------------------------------- http


async def test_http_status_default_and_shorthand(backend: str) -> None:
    run = run_with(backend, order_id="ORD-1")
    result = await passes({"http": "{{vars.admin_url}}/orders/{{captured.order_id}}"}, run)
    assert "GET" in result.reason and "/orders/ORD-1" in result.reason and "200" in result.reason
    result = await fails({"http": f"{backend}/orders/ORD-404"}, run)
    assert "expected status 2xx, found 404" in result.reason and "not found" in result.reason
    await passes({"http": {"url": f"{backend}/orders/ORD-404", "status": 404}}, run)
    await passes({"http": {"url": f"{backend}/orders/ORD-404", "status": [200, "4xx"]}}, run)
    await fails({"http": {"url": f"{backend}/orders/ORD-1", "status": [201, 404]}}, run)


async def test_http_json_path(backend: str) -> None:
    run = run_with(backend, order_id="ORD-1")
    url = "{{vars.admin_url}}/orders/{{captured.order_id}}"
    await passes({"http": {"url": url, "json_path": {"path": "$.status", "equals": "refunded"}}}, run)
    result = await fails({"http": {"url": url, "json_path": {"path": "$.status", "equals": "open"}}}, run)
    assert '$.status in the body: expected "open", found "refunded"' in result.reason
    await passes({"http": {"url": url, "json_path": {"path": "$.items", "length": 3}}}, run)
    await passes({"http": {"url": url, "json_path": {"path": "$.id", "equals": "{{captured.order_id}}"}}}, run)
    await passes({"http": {"url": url, "json_path": "$.id"}}, run)
    await fails({"http": {"url": url, "json_path": "$.refund_id"}}, run)
    await passes({"http": {"url": url, "json_path": {"path": "$.refund_id", "exists": False}}}, run)
    result = await fails({"http": {"url": f"{backend}/text", "json_path": "$.x"}}, run)
    assert "expected a JSON body" in result.reason


async def test_http_redirect_not_followed_says_where_to(backend: str) -> None:
    # before: 'expected status 2xx, found 307: ""', and not where the backend sent it
    result = await fails({"http": f"{backend}/moved"}, run_with())
    assert result.reason.endswith(f"found 307: \"\" (redirected to {backend}/orders/ORD-1, which is not followed: "
                                  "write that URL)"), result.reason
    await passes({"http": {"url": f"{backend}/moved", "status": 307}}, run_with())


async def test_http_reads_at_most_a_bounded_answer(backend: str) -> None:
    # before: read whole into memory, the answer never ending: until the check's timeout, and then 'no answer';
    # then a failed verdict, the agent's (exit 1), though only the backend's answer was at fault
    with pytest.raises(InfraError) as caught:
        await verdict({"http": {"url": f"{backend}/endless", "contains": "done", "timeout": "20s"}}, run_with())
    assert str(caught.value) == f"GET {backend}/endless: the answer is larger than 16,000,000 bytes, more than an " \
                                "http check reads"


async def test_http_contains(backend: str) -> None:
    run = run_with(backend)
    await passes({"http": {"url": f"{backend}/text", "contains": "nominal"}}, run)
    await passes({"http": {"url": f"{backend}/text", "contains": ["all", "nominal"]}}, run)
    result = await fails({"http": {"url": f"{backend}/text", "contains": "degraded"}}, run)
    assert '"degraded"' in result.reason and "nominal" in result.reason


async def test_http_method_headers_and_body(backend: str) -> None:
    run = run_with(backend, order_id="ORD-1")
    entry = {"http": {
        "url": f"{backend}/echo", "method": "post",
        "headers": {"Authorization": "Bearer {{secrets.TOKEN}}"},
        "body": {"order": "{{captured.order_id}}"},
        "json_path": {"path": "$.body", "matches": '"order": ?"ORD-1"'},
    }}
    await passes(entry, run)
    for path, expected in [("$.method", "POST"), ("$.authorization", "Bearer s3cret"),
                           ("$.content_type", "application/json")]:
        await passes({"http": {**entry["http"], "json_path": {"path": path, "equals": expected}}}, run)
    text_body = {"url": f"{backend}/echo", "method": "PUT", "body": "plain {{captured.order_id}}",
                 "json_path": {"path": "$.body", "equals": "plain ORD-1"}}
    await passes({"http": text_body}, run)
    result = await fails({"http": {**entry["http"], "json_path": {"path": "$.method", "equals": "GET"}}}, run)
    assert "s3cret" not in result.reason


async def test_http_unreachable_is_the_tests_error_not_the_agents_failure(backend: str) -> None:
    # before: a failed verdict blamed on the agent (exit 1), and with negate: true, a pass
    port = refused_port()
    for entry in ({"http": f"http://127.0.0.1:{port}/health"}, {"http": f"http://127.0.0.1:{port}/health",
                                                                  "negate": True}):
        with pytest.raises(InfraError) as caught:
            await verdict(entry, run_with())
        assert str(caught.value) == f"GET http://127.0.0.1:{port}/health: could not reach it: Connection refused"
    # a URL written as none is refused where written; one a template makes is whole only when the check runs:
    # none then is the suite's (it was "could not reach it", the environment's)
    with pytest.raises(SuiteProblem, match="not a URL that can be requested"):
        await verdict({"http": "{{vars.admin_url}}/health"}, run_with(""))


async def test_http_a_header_that_cannot_be_sent_is_not_said_unreachable(backend: str) -> None:
    # before: 'could not reach it (LocalProtocolError: the header ...)': the backend was never asked
    run = run_with(backend)
    run.context = Context(captured={}, vars={}, secrets={"TOKEN": "s3cret\n"})
    with pytest.raises(InfraError) as caught:
        await verdict({"http": {"url": f"{backend}/echo", "headers": {"X-Token": "{{secrets.TOKEN}}"}}}, run)
    said = str(caught.value)
    assert said.startswith(f"GET {backend}/echo: cannot be sent: ") and "line break" in said, said


async def test_http_a_header_with_an_umlaut_is_sent_as_utf8(backend: str) -> None:
    # before: httpx encoded the header as ASCII: 'http: internal error: UnicodeEncodeError' (traceback.txt),
    # where the rest target's aiohttp sends UTF-8
    run = run_with(backend)
    run.context = Context(captured={}, vars={}, secrets={"TOKEN": "S3cr3t+/=&ümlaut"})
    # its UTF-8 bytes, which Starlette reads as Latin-1 (as HTTP has it)
    sent = "Bearer S3cr3t+/=&ümlaut".encode().decode("latin-1")
    await passes({"http": {"url": f"{backend}/echo", "headers": {"Authorization": "Bearer {{secrets.TOKEN}}"},
                           "json_path": {"path": "$.authorization", "equals": sent}}}, run)


async def test_a_check_that_could_not_be_made_is_not_passed_by_negate(backend: str) -> None:
    # before: "negated: cannot check: ..." passed: a value never found, a metric never measured
    for entry in ({"metric": {"name": "time_to_frist_token_ms", "lte": 10}, "negate": True},
                  {"contains": "{{captured.eta}}", "negate": True}):
        result = await fails(entry, run_with())
        assert result.reason.startswith("not decided: "), result.reason  # beside its label, `not metric`


async def test_http_timeout_is_the_backends_as_an_unreachable_one_is(backend: str) -> None:
    # before: a failed verdict, the agent's (exit 1), while a backend that could not be reached was the test's
    # error (exit 3): a slow backend is no more the agent's doing; negated, it is the same error
    for entry in ({"http": {"url": f"{backend}/slow", "timeout": "300ms"}},
                  {"http": {"url": f"{backend}/slow", "timeout": "300ms"}, "negate": True}):
        started = time.monotonic()
        with pytest.raises(InfraError) as caught:
            await verdict(entry, run_with())
        assert str(caught.value) == f"GET {backend}/slow: no answer within 0.3s (its timeout)"
        # given up at the timeout (0.3 s and a few ms), not when the answer came (SLOW_SECONDS)
        assert time.monotonic() - started < SLOW_SECONDS / 2


def test_an_http_check_that_could_not_be_made_is_one_line_naming_it_once(backend: str, tmp_path: Path) -> None:
    # before: `! http: http check: GET ...: could not reach it (ConnectError: [Errno 111] Connect call failed
    # ('127.0.0.1', 9))`, and each assertion's line `not decided: http check: GET ...`
    port = refused_port()
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
tests:
  - name: checked
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert:
      - {{ http: "http://127.0.0.1:{port}/health" }}
      - {{ http: {{ url: "{backend}/slow", timeout: 300ms }}, name: backend state }}
      - {{ http: "http://127.0.0.1:{port}/gone", negate: true }}
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    refused = f"http://127.0.0.1:{port}"
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert f"! http: GET {refused}/health: could not reach it: Connection refused" in lines, done.stdout
    assert f"✗ backend state: not decided: GET {backend}/slow: no answer within 0.3s (its timeout)" in lines, \
        done.stdout
    assert f"✗ not http: not decided: GET {refused}/gone: could not reach it: Connection refused" in lines, \
        done.stdout
    assert "http check" not in done.stdout
    [row] = map(json.loads, next((tmp_path / "out").glob("*/results.jsonl")).read_text().splitlines())
    assert row["runs"][0]["error"] == f"http: GET {refused}/health: could not reach it: Connection refused"


async def test_http_timeout_bounds_an_answer_that_trickles(backend: str) -> None:
    # before: an answer arriving a byte at a time was waited for to its end (httpx's timeout is per read), and
    # then passed: a check's `timeout` is the whole request's; then "no answer within 0.3s", though its HTTP 200
    # had come at once
    started = time.monotonic()
    with pytest.raises(InfraError) as caught:
        await verdict({"http": {"url": f"{backend}/trickle", "timeout": "300ms"}}, run_with())
    assert str(caught.value) == (f"GET {backend}/trickle: answered HTTP 200 but did not send its whole body within "
                                 "0.3s (its timeout)")
    assert time.monotonic() - started < SLOW_SECONDS / 2


async def test_http_template_without_value(backend: str) -> None:
    result = await fails({"http": "{{vars.admin_url}}/orders/{{captured.order_id}}"}, run_with(backend))
    assert "{{captured.order_id}}" in result.reason


def test_http_parse_errors() -> None:
    assert problem({"http": {"url": "http://x", "status": "6xx"}}).loc[:2] == ("http", "status")
    # before: each run's error (exit 3), 'could not reach it (UnsupportedProtocol: the URL's scheme ...)'
    for url in ("not a url", "ftp://x/y", "/orders/1"):
        assert "expected an http:// or https:// URL" in str(problem({"http": url}))
        assert problem({"http": {"url": url}}).loc[:2] == ("http", "url")
    problem({"http": {"url": "http://x", "json_path": {"path": "$["}}})
    problem({"http": {"url": "http://x", "method": "GE T"}})
    problem({"http": {"url": "http://x", "timeout": "soon"}})
    problem({"http": {"url": "http://x", "verb": "GET"}})
    problem({"http": {"method": "GET"}})


# ---------------------------------------------------------------- command


async def test_command_exit_code(tmp_path: Path) -> None:
    run = run_with(tmp=tmp_path)
    result = await passes({"command": "echo hello"}, run)
    assert "exited 0" in result.reason
    result = await fails({"command": "echo first; echo last line; exit 3"}, run)
    assert "expected exit code 0" in result.reason and "exit code 3" in result.reason
    assert "last line" in result.reason
    await passes({"command": {"run": "exit 3", "exit_code": 3}}, run)
    await fails({"command": {"run": "true", "exit_code": 3}}, run)


async def test_command_output_checks(tmp_path: Path) -> None:
    run = run_with(tmp=tmp_path)
    await passes({"command": {"run": "echo refunded; echo oops >&2", "contains": ["refunded", "oops"]}}, run)
    result = await fails({"command": {"run": "echo pending", "contains": "refunded"}}, run)
    assert '"refunded"' in result.reason and "pending" in result.reason
    await passes({"command": {"run": "echo ok", "not_contains": "error"}}, run)
    await fails({"command": {"run": "echo an error >&2", "not_contains": ["error"]}}, run)
    await passes({"command": {"run": "echo total=42", "matches": r"total=\d+"}}, run)
    await fails({"command": {"run": "echo total=x", "matches": r"total=\d+"}}, run)
    await passes({"command": {"run": "echo ok; exit 1", "exit_code": None, "contains": "ok"}}, run)


async def test_command_runs_in_the_suite_folder_with_env(tmp_path: Path) -> None:
    (tmp_path / "check.sh").write_text('#!/bin/sh\necho "order=$1 mode=$MODE port=$PORT"\n')
    (tmp_path / "check.sh").chmod(0o755)
    run = run_with(tmp=tmp_path, order_id="ORD-1", mode="strict")
    entry = {"command": {"run": "./check.sh {{captured.order_id}}", "env": {"MODE": "{{captured.mode}}",
                                                                          "PORT": 8080},
                         "contains": "order=ORD-1 mode=strict port=8080"}}
    await passes(entry, run)
    await passes({"command": {"run": "echo $HOME", "matches": "/"}}, run)


async def test_command_quotes_template_values(tmp_path: Path) -> None:
    run = run_with(tmp=tmp_path, order_id="ORD-1; echo injected > pwned", spaced="a  b")
    result = await passes({"command": {"run": "echo {{captured.order_id}}", "contains": "ORD-1; echo"}}, run)
    assert not (tmp_path / "pwned").exists(), result.reason
    await passes({"command": {"run": "printf '%s|' {{captured.spaced}}", "contains": "a  b|"}}, run)


async def test_command_timeout_kills_the_process_group(tmp_path: Path) -> None:
    run = run_with(tmp=tmp_path)
    marker = tmp_path / "survived"
    started = time.monotonic()
    # the command would run a minute: far from any bound a loaded machine's process start could reach
    with pytest.raises(InfraError) as caught:
        await verdict({"command": {"run": f"echo started; (sleep 0.5; touch {marker}) & sleep 60",
                                   "timeout": "300ms"}}, run)
    assert time.monotonic() - started < 30
    assert "did not finish within 0.3s" in str(caught.value) and "started" in str(caught.value)
    await asyncio.sleep(0.8)
    assert not marker.exists()


async def test_command_default_timeout_comes_from_the_run(tmp_path: Path) -> None:
    run = run_with(tmp=tmp_path)
    run.command_timeout = 0.2
    with pytest.raises(InfraError, match=r"within 0\.2s"):
        await verdict({"command": "sleep 3"}, run)


async def test_a_command_killed_at_its_timeout_is_the_environments_error_not_the_agents(tmp_path: Path) -> None:
    # before: a failed verdict, the agent's (exit 1), and negated a pass: the check's own process hung, which says
    # nothing of the agent, as an http check's backend that never answers (exit 3, since session 29)
    run = run_with(tmp=tmp_path)
    for entry in ({"command": {"run": "echo checking; sleep 60", "timeout": "300ms"}},
                  {"command": {"run": "echo checking; sleep 60", "timeout": "300ms"}, "negate": True}):
        with pytest.raises(InfraError) as caught:
            await verdict(entry, run)
        assert str(caught.value) == "`echo checking; sleep 60` did not finish within 0.3s (its timeout; killed), " \
                                    'output: "checking"'
    # a script that waits for the agent's effect and gives up by itself is the agent's failure
    result = await fails({"command": {"run": "echo no refund yet; exit 1", "timeout": "5s"}}, run)
    assert result.reason.startswith("`echo no refund yet; exit 1`: expected exit code 0"), result.reason


async def test_command_problems_are_failed_verdicts(tmp_path: Path) -> None:
    result = await fails({"command": "echo {{captured.none}}"}, run_with(tmp=tmp_path))
    assert "{{captured.none}}" in result.reason
    # a folder the shell cannot start in is nobody's answer: the test's error (it was a failed verdict, the agent's)
    with pytest.raises(InfraError, match="could not start"):
        await verdict({"command": "echo hi"}, run_with(tmp=tmp_path / "missing"))


def test_command_parse_errors() -> None:
    problem({"command": {"run": "x", "exit_code": None}})
    problem({"command": {"run": "x", "matches": "("}})
    problem({"command": {"run": ""}})
    problem({"command": {"run": "x", "cwd": "/"}})
