"""An MCP server that prints chatter on stdout: one note in the result, its lines in the server's log, nothing
on the console."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from forked import script_command

SERVERS = Path(__file__).resolve().parents[1] / "agents" / "mcp_servers.py"
NOISE_LINES = 25
START = "connect: { timeout: 60s }"
"""For the servers that import the MCP SDK: connect.timeout's 10 s ran out for a niced worker's server on a loaded
machine (see test_mcp_target.py's START_TIMEOUT)."""
"""Told to the server on its command line: importing it would import the MCP SDK into every xdist worker as it
collects this module (0.6 s of CPU each), where nothing else needs it."""


def http_faults_target(name: str, folder: Path) -> str:
    """A suite's target `name` on tests/agents/mcp_http_faults.py, started by tamesu on a port of the session's."""
    import sys

    server = Path(__file__).resolve().parents[1] / "agents" / "mcp_http_faults.py"
    return (f"  {name}: {{ type: mcp, command: {json.dumps(sys.executable)}, "
            f"args: [{json.dumps(str(server))}, '{{{{session.port}}}}', {json.dumps(str(folder))}], "
            f"url: 'http://127.0.0.1:{{{{session.port}}}}/mcp', {START} }}\n")


def test_stdout_noise_goes_to_the_servers_log_and_is_said_once(tmp_path: Path, tamesu: Any) -> None:
    # a fork of a warm process (tests/forked.py)
    command, *args = script_command(SERVERS, "noisy", "--noise", str(NOISE_LINES))
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ when: "(?i)order", '
        'tool_calls: [{ name: get_order, args: { order_id: ORD-1001 } }], say: "It has shipped." }] }\n')
    (tmp_path / "noisy.tamesu.yaml").write_text(
        "targets:\n"
        f"  shop: {{ type: mcp, command: {json.dumps(command)}, args: {json.dumps(args)}, {START} }}\n"
        "tests:\n"
        "  - name: order\n"
        "    target: shop\n"
        '    scenario: { script: [{ say: "Where is my order?" }] }\n'
        "    assert: [{ tool_called: get_order }, { contains: shipped }]\n")
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "Failed to parse" not in output
    [run] = list((tmp_path / "out").glob("*/noisy/order/run-1"))
    log = (run / "mcp-server.log").read_text()
    assert log.count("[stdout, not JSON-RPC] DEBUG loading plugin") == NOISE_LINES
    [noise] = [e["data"] for e in json.loads((run / "result.json").read_text())["events"]
               if e["name"] == "mcp_stdout_noise"]
    assert noise["lines"] == NOISE_LINES and noise["first"] == "DEBUG loading plugin 0"
    assert noise["note"] == \
        f"the server printed {NOISE_LINES} lines that are not JSON-RPC on stdout (in mcp-server.log)"
    # a green run says it along the way (the stdio protocol's own channel was misused), the lines themselves not
    assert "1 MCP server printed lines that are not JSON-RPC on stdout" in done.stdout, done.stdout


def test_a_tool_call_the_server_may_have_carried_out_is_never_sent_again(tmp_path: Path, tamesu: Any) -> None:
    # before: the refund was made twice (the call sent again on a new connection) and the test passed, with
    # "1 request sent again after the connection dropped" the only trace
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ when: "(?i)refund", '
        'tool_calls: [{ name: refund, args: { id: "9" } }], say: "Refund issued." }] }\n')
    (tmp_path / "bank.tamesu.yaml").write_text(
        "targets:\n" + http_faults_target("bank", tmp_path) +
        "tests:\n"
        "  - name: one refund\n"
        "    target: bank\n"
        '    scenario: { script: [{ say: "Please refund order 9" }] }\n')
    done = tamesu(["run", "--out", str(tmp_path / "out")], cwd=tmp_path)
    assert (tmp_path / "refunds.txt").read_text() == "1", done.stdout + done.stderr
    [run] = list((tmp_path / "out").glob("*/bank/one-refund/run-1"))
    events = json.loads((run / "result.json").read_text())["events"]
    assert not [e for e in events if e["name"] == "resent"], events
    [result] = [e["data"] for e in events if e["name"] == "tool_result"]
    assert result["outcome"] != "ok", result  # the dropped call is the tool's failure, said to the model


def test_a_listing_that_breaks_the_mcp_schema_is_said_in_one_line(tmp_path: Path, tamesu: Any) -> None:
    # before: "ValidationError: 1 validation error for ListToolsResult tools.0.inputSchema Field required
    # [type=missing, ...] For further information visit https://errors.pydantic.dev/..."
    import sys

    _hand_written_server(tmp_path, "{'name': 'lookup', 'description': 'forgot its inputSchema'}")
    (tmp_path / "s.tamesu.yaml").write_text(
        "models:\n  target: { provider: fake, rules: [ { when: hi, say: hello } ] }\n"
        f"targets:\n  s: {{ type: mcp, command: {json.dumps(sys.executable)}, args: [server.py] }}\n"
        "tests:\n  - { name: t, target: s, scenario: { script: [ { say: hi } ] } }\n")
    done = tamesu(["run", "--out", str(tmp_path / "out"), "--color", "never"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert ("the server's ListToolsResult breaks the MCP schema: tools.0.inputSchema: Field required"
            in done.stdout), done.stdout
    assert "errors.pydantic.dev" not in done.stdout + done.stderr


def test_a_reply_under_another_requests_id_is_said_not_only_a_timeout(tmp_path: Path, tamesu: Any) -> None:
    # before: the SDK dropped the reply (id 1002 for request 2) without a word, and the call read only
    # "the tool did not answer within 1s"
    import sys

    _hand_written_server(tmp_path, "{'name': 'lookup', 'inputSchema': {'type': 'object'}}",
                         "answer_id, result = msg['id'] + 1000, {'content': [{'type': 'text', 'text': 'found'}]}")
    # the call waits out call_timeout in full (its answer never comes under its id): 1 s, which the stray reply
    # comes well within on a quiet machine; made again with 5 s, enough on a loaded one, only when it came after
    for call_timeout in (1, 5):
        (tmp_path / "s.tamesu.yaml").write_text(
            "models:\n  target: { provider: fake, rules: [ { when: hi, tool_calls: [ { name: lookup } ], say: ok } ] "
            "}\n"
            f"targets:\n  s: {{ type: mcp, command: {json.dumps(sys.executable)}, args: [server.py], "
            f"call_timeout: {call_timeout}s }}\n"
            "tests:\n  - { name: t, target: s, scenario: { script: [ { say: hi } ] } }\n")
        out = tmp_path / f"out-{call_timeout}"
        done = tamesu(["run", "--out", str(out), "--color", "never"], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        [run] = list(out.glob("*/s/t/run-1"))
        result = json.loads((run / "result.json").read_text())
        if any(e["name"] == "mcp_stray_reply" and e["data"]["waiting"] for e in result["events"]):
            break
    [stray] = [e["data"] for e in result["events"] if e["name"] == "mcp_stray_reply"]
    [call] = result["tool_calls"]
    assert stray["waiting"] == [stray["id"] - 1000]  # the tools/call it was meant for, still waiting
    assert call["result"]["error"] == (f"the tool did not answer within {call_timeout}s (the server sent replies "
                                       f"with ids no request had: {stray['id']}; an answer under another "
                                       "request's id?)")
    assert f"[stdout, a reply to no request sent] id {stray['id']}" in (run / "mcp-server.log").read_text()


def test_a_test_cut_by_its_timeout_keeps_what_the_target_counted(tmp_path: Path, tamesu: Any) -> None:
    # before: the run's metrics held no mcp_tool_calls nor model_calls, though the call to `hang` was made
    command, *args = script_command(SERVERS)
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ when: "(?i)hang", tool_calls: [{ name: hang, args: {} }], '
        'say: "done" }] }\n')
    # the tool hangs an hour, so the timeout cuts the test in its call once the call is made. It comes some 0.1 s
    # in on a quiet machine, but a niced worker beside the audio lanes took more than 3 s for the server's start,
    # the model's call and the tool's: a run cut before the call (no tool_call event) is made again with 15 s,
    # rather than every run waiting out 15 s
    for timeout in (2, 15):
        (tmp_path / "t.tamesu.yaml").write_text(
            f"targets:\n  shop: {{ type: mcp, command: {json.dumps(command)}, args: {json.dumps(args)}, {START} }}\n"
            f"tests:\n  - name: slow\n    target: shop\n    timeout: {timeout}s\n"
            '    scenario: { script: [{ say: "please hang" }] }\n')
        done = tamesu(["run", "--out", str(tmp_path / f"out-{timeout}")], cwd=tmp_path)
        [run] = list((tmp_path / f"out-{timeout}").glob("*/t/slow/run-1"))
        result = json.loads((run / "result.json").read_text())
        if any(event["name"] == "tool_call" for event in result["events"]):
            break
    assert done.returncode == 1, done.stdout + done.stderr
    assert [event["data"]["tool"] for event in result["events"] if event["name"] == "tool_call"] == ["hang"]
    assert result["metrics"].get("mcp_tool_calls") == 1 and result["metrics"].get("model_calls") == 1, result
    # before: only "the test took longer than its timeout (2s)", as if the model had been slow: nothing said the
    # time ran out in a tool call the server never answered
    [reason] = [a["reason"] for a in result["assertions"] if a["name"] == "conversation"]
    assert re.fullmatch(rf"the test took longer than its timeout \({timeout}s\); a call to hang had waited "
                        r"\d+\.\ds for its answer", reason), reason
    assert done.stdout.count("a call to hang had waited") == 1, done.stdout


def test_a_tool_name_a_provider_refuses_is_offered_under_one_it_takes(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # MCP allows `orders.get`; OpenAI's API refused the request ("Invalid 'tools[0].function.name'"), exit 3
    import sys

    from model_servers import OpenAIServer, text, tool_call

    (tmp_path / "server.py").write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    if 'id' not in msg:\n"
        "        continue\n"
        "    result = {}\n"
        "    if msg['method'] == 'initialize':\n"
        "        result = {'protocolVersion': msg['params']['protocolVersion'], 'capabilities': {'tools': {}},\n"
        "                  'serverInfo': {'name': 's', 'version': '1'}}\n"
        "    elif msg['method'] == 'tools/list':\n"
        "        result = {'tools': [{'name': 'orders.get', 'inputSchema': {'type': 'object'}}]}\n"
        "    elif msg['method'] == 'tools/call':\n"
        "        result = {'content': [{'type': 'text', 'text': 'called ' + msg['params']['name']}]}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], 'result': result}), flush=True)\n")
    model = OpenAIServer()
    base = model.base_url(serve(model.app).url)
    model.plan(tool_call("orders_get", {}), text("It has shipped."))
    (tmp_path / "s.tamesu.yaml").write_text(
        f"models:\n  target: {{ provider: openai, model: m, base_url: '{base}', api_key: k, timeout: 10s }}\n"
        f"targets:\n  s: {{ type: mcp, command: {json.dumps(sys.executable)}, args: [server.py] }}\n"
        "tests:\n  - name: t\n    target: s\n    scenario: { script: [ { say: where is it } ] }\n"
        "    assert: [ { tool_called: orders.get } ]\n")
    done = tamesu(["run", "--out", str(tmp_path / "out"), "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [t["function"]["name"] for t in model.calls()[0].body["tools"]] == ["orders_get"]
    [run] = list((tmp_path / "out").glob("*/s/t/run-1"))
    result = json.loads((run / "result.json").read_text())
    assert [(c["name"], c["result"]) for c in result["tool_calls"]] == [("orders.get", "called orders.get")]
    [server] = [e["data"] for e in result["events"] if e["name"] == "mcp_server"]
    assert server["renamed"] == {"orders.get": "orders_get"}


def test_model_names_keep_what_providers_take_and_tell_the_rest_apart() -> None:
    from tamesu.targets.mcp._names import model_names

    long = "a" * 100
    names = model_names(["get_order", "orders.get", "orders/get", long, "x:y"])
    assert names["get_order"] == "get_order" and names["orders.get"] == "orders_get" and names["x:y"] == "x_y"
    assert names["orders/get"].startswith("orders_get_") and names["orders/get"] != "orders_get"  # told apart
    assert len(names[long]) == 64 and names[long].startswith("a" * 55)
    assert all(len(n) <= 64 and n.replace("_", "").replace("-", "").isalnum() for n in names.values())



def test_an_http_status_of_a_tool_call_is_said_and_a_refusal_is_the_environments(tmp_path: Path, tamesu: Any) -> None:
    # before: both read "Server returned an error response", graded as the tool's error the model saw: no status
    # anywhere, and an expired token (401) blamed on nobody
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ when: "(?i)five", tool_calls: [{ name: five, args: {} }], '
        'say: "sorry" }, { when: "(?i)unauth", tool_calls: [{ name: unauth, args: {} }], say: "sorry" }] }\n')
    (tmp_path / "f.tamesu.yaml").write_text(
        "targets:\n" + http_faults_target("s", tmp_path) +
        "tests:\n"
        '  - { name: five, target: s, scenario: { script: [{ say: "use five" }] } }\n'
        '  - { name: unauth, target: s, scenario: { script: [{ say: "use unauth" }] } }\n')
    done = tamesu(["run", "--out", str(tmp_path / "out"), "--color", "never"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "mcp target s: the MCP server refused the call to unauth: HTTP 401 Unauthorized" in done.stdout
    [five] = list((tmp_path / "out").glob("*/f/five/run-1"))
    [call] = json.loads((five / "result.json").read_text())["tool_calls"]
    assert call["result"] == {"error": "Server returned an error response (HTTP 500 Internal Server Error)"}


def test_a_large_tool_result_is_written_whole_once_not_in_its_event_too() -> None:
    # a 3 MB result made a 9 MB result.json: the tool_result event, the run's tool calls and the turn's each held it
    from tamesu.targets.mcp.target import _for_the_timeline

    small = {"content": [{"type": "text", "text": "ok"}]}
    assert _for_the_timeline(small) is small
    big = {"content": [{"type": "text", "text": "x" * 3_000_000}]}
    cut = _for_the_timeline(big)
    assert cut["cut"].endswith("characters; the whole result is the tool call's") and len(json.dumps(cut)) < 2_000


def test_a_large_tool_results_start_is_cut_leaving_no_head_of_a_secret() -> None:
    # before: its first 1,000 characters cut bare; the redactor masks a secret's head only before `…`, so a key the
    # cut fell in was written to result.json's tool_result event up to the cut ("zq7-tool")
    from tamesu.suite.secrets import Redactor
    from tamesu.targets.mcp.target import _for_the_timeline

    key = "zq7-tool-9f31-aa08-key-of-the-result"
    redactor = Redactor()
    redactor.add(key)
    big = {"content": [{"type": "text", "text": "word " * 190 + key + " more" * 100_000}]}
    cut = redactor.data(_for_the_timeline(big))
    assert key[:6] not in json.dumps(cut) and cut["start"].endswith("…"), cut["start"][-80:]


def _hand_written_server(folder: Path, tool: str, on_call: str = "result = {}") -> None:
    """`server.py` in `folder`: an MCP server over stdio written by hand (no SDK to correct it), listing the one
    `tool` (a Python literal) and answering a tools/call with the line `on_call`, which sets `answer_id` (the
    request's id unless it says otherwise) and `result`."""
    (folder / "server.py").write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    if 'id' not in msg:\n"
        "        continue\n"
        "    answer_id, result = msg['id'], {}\n"
        "    if msg['method'] == 'initialize':\n"
        "        result = {'protocolVersion': msg['params']['protocolVersion'], 'capabilities': {'tools': {}},\n"
        "                  'serverInfo': {'name': 's', 'version': '1'}}\n"
        "    elif msg['method'] == 'tools/list':\n"
        f"        result = {{'tools': [{tool}]}}\n"
        "    elif msg['method'] == 'tools/call':\n"
        f"        {on_call}\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': answer_id, 'result': result}), flush=True)\n")


def test_a_reply_over_http_under_an_id_no_request_had_is_said_at_once(tmp_path: Path, tamesu: Any) -> None:
    # before: a JSON body under id N+1000 was dropped by the SDK and the call read "the tool did not answer within
    # 20s"; in an event stream, the SDK gave it the request's id and the answer to some other call was taken whole
    (tmp_path / "tamesu.yaml").write_text(
        'models:\n  target: { provider: fake, rules: [{ when: "(?i)json", tool_calls: [{ name: stray_json, args: {} }],'
        ' say: "done" }, { when: "(?i)sse", tool_calls: [{ name: stray_sse, args: {} }], say: "done" }] }\n')
    (tmp_path / "f.tamesu.yaml").write_text(
        "targets:\n" + http_faults_target("s", tmp_path).replace(" }\n", ", call_timeout: 20s }\n") +
        "tests:\n"
        '  - { name: json, target: s, scenario: { script: [{ say: "use json" }] } }\n'
        '  - { name: sse, target: s, scenario: { script: [{ say: "use sse" }] } }\n')
    done = tamesu(["run", "--out", str(tmp_path / "out"), "--color", "never"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("json", "sse"):
        [run] = list((tmp_path / "out").glob(f"*/f/{name}/run-1"))
        result = json.loads((run / "result.json").read_text())
        [call] = result["tool_calls"]
        [stray] = [e["data"] for e in result["events"] if e["name"] == "mcp_stray_reply"]
        assert stray["id"] == stray["waiting"][0] + 1000, stray
        assert call["result"] == {"error": f"protocol error: the server answered the tools/call with id {stray['id']}"
                                           f", not the request's id {stray['waiting'][0]}"}, call
        [outcome] = [e["data"] for e in result["events"] if e["name"] == "tool_result"]
        assert outcome["outcome"] == "error" and outcome["ms"] < 10_000, outcome


@pytest.mark.parametrize("kind, came_back", [
    # an agent's own JSON endpoint: the start failed with the SDK's message, pydantic's report of 11 validation
    # errors on 13 lines, then "cannot be reached" of a server that had answered
    ("json", "JSON that is no JSON-RPC message"),
    # a web site, a plain-text health check: "cannot be reached: MCP error -32600: Unexpected content type:
    # text/html; charset=utf-8", neither the page nor the url named
    ("html", "HTTP 200 and a web page titled 'Welcome to nginx!' (text/html)"),
    # what it said quoted as every line quotes words, cut with … (a Python repr of its first 60 characters and ...)
    ("text", 'HTTP 200 and text/plain: "Hello, world and more, and more, and more, and more, and…"'),
])
def test_a_url_that_is_no_mcp_server_is_one_line(tmp_path: Path, tamesu: Any, serve: Any, kind: str,
                                                 came_back: str) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    async def chat(request: Any) -> Response:
        if kind == "html":
            return Response("<!doctype html><html><head><title>Welcome to nginx!</title></head></html>",
                            media_type="text/html")
        if kind == "text":
            return PlainTextResponse("Hello, world\n\n" + "and more, " * 10)
        return JSONResponse({"reply": "Hello! How can I help?", "done": False})

    url = serve(Starlette(routes=[Route("/chat", chat, methods=["POST", "GET"])])).url
    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "hi" }] }\n')
    (tmp_path / "s.tamesu.yaml").write_text(
        f"targets:\n  shop: {{ type: mcp, url: '{url}/chat', connect: {{ attempts: 1 }} }}\n"
        "tests: [ { name: t, target: shop, scenario: { script: [ { say: hi } ] } } ]\n")
    done = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    [said] = [line for line in done.stdout.splitlines() if line.lstrip().startswith("!")]
    assert said.strip() == (f"! mcp target shop: {url}/chat is not an MCP server: it answered the session's start "
                            f"(initialize) with {came_back}: does url name the MCP server's streamable HTTP "
                            "endpoint (often /mcp)?"), done.stdout
    assert "validation error" not in done.stdout and "Field required" not in done.stdout, done.stdout
