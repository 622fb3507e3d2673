"""A secret never reaches disk or console in any form: plain, URL-encoded (path and form style), base64,
JSON-escaped. Every artifact, report (JUnit, HTML, JSON, markdown, the GitHub summary), console line and
replay-cache entry is searched, with an agent that echoes the token in every form, a model judge that
records the conversation, error lines written by tamesu ("cannot reach") and by a2a-sdk (a 404), and the
log lines of libraries."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from yarl import URL

from model_servers import OpenAIServer
from ports import refused_port
from tamesu.net.serve import ThreadServer
from tamesu.suite.secrets import Redactor, mask_logging

Serve = Callable[[Any], ThreadServer]
SECRET = 'tok en/7+"q"ü-4711'
"""Changed by every encoding: a space, a slash, a plus, quotes, a non-ASCII letter."""


def forms(value: str) -> dict[str, str]:
    raw = value.encode()
    return {
        "plain": value,
        "path-encoded": quote(value, safe=""),
        "path-encoded keeping /": quote(value),
        "form-encoded": quote_plus(value),
        "as httpx writes a path": quote(value, safe="/+@!$&'()*,;=:~"),
        "lower-case hex": quote(value, safe="").lower(),
        "hex of the bytes": raw.hex(),
        "hex of the bytes, upper-case": raw.hex().upper(),
        "base64": base64.b64encode(raw).decode(),
        "url-safe base64": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "JSON-escaped": json.dumps(value)[1:-1],
        "JSON-escaped, not ASCII-only": json.dumps(value, ensure_ascii=False)[1:-1],
        "JSON-escaped as PHP writes it (\\/)": json.dumps(value)[1:-1].replace("/", "\\/"),
        "JSON-escaped twice (an escaped reply quoted in a reason)": json.dumps(json.dumps(value)[1:-1])[1:-1],
    }


def leaks(text: str) -> list[str]:
    """The forms of SECRET found in `text`, also inside a base64 text of `user:SECRET`."""
    found = [name for name, form in forms(SECRET).items() if form in text]
    basic_core = base64.b64encode(b"u:" + SECRET.encode()).decode()[3:-2]
    return found + (["inside base64 of user:secret"] if basic_core in text else [])


def everything_written(root: Path, *skip: Path) -> dict[Path, str]:
    return {p: p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*")
            if p.is_file() and p not in skip}


@pytest.mark.parametrize("form", list(forms(SECRET)))
def test_the_redactor_masks_each_form(form: str) -> None:
    redactor = Redactor()
    redactor.add(SECRET)
    encoded = forms(SECRET)[form]
    assert redactor.text(f"before {encoded} after") == "before *** after"


def test_base64_of_a_longer_text_is_masked_at_any_alignment() -> None:
    redactor = Redactor()
    redactor.add(SECRET)
    for prefix in (b"", b"u:", b"ab:", b"user:"):
        header = "Basic " + base64.b64encode(prefix + SECRET.encode() + b"!").decode()
        masked = redactor.text(header)
        assert "***" in masked and leaks(masked) == [], (prefix, masked)


async def _echo_everywhere(request: Request) -> JSONResponse:
    token = (await request.json())["token"]
    raw = token.encode()
    said = (f"plain {token} | path {quote(token, safe='')} | form {quote_plus(token)} | "
            f"b64 {base64.b64encode(raw).decode()} | basic {base64.b64encode(b'u:' + raw).decode()} | "
            f"json {json.dumps(token)[1:-1]} | hex {raw.hex()} | signed 0x{(b'sig:' + raw).hex().upper()}")
    return JSONResponse({"text": said, "echo": {"token": token}})


def _project(tmp_path: Path, judge_url: str, target: str, assertion: str = "judge: 'The agent answers'") -> None:
    (tmp_path / ".env").write_text(f"BOT_TOKEN='{SECRET}'\n")
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { dir: .tamesu/cache }\nmodels:\n"
        f"  judge: {{ provider: openai, model: test-model, base_url: '{judge_url}', timeout: 5s }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot:
{target}
tests:
  - name: leaky
    target: bot
    scenario: {{ script: [ {{ say: "my token is {{{{secrets.BOT_TOKEN}}}}" }} ] }}
    assert: [ {{ {assertion} }}, {{ contains: "nothing like this" }} ]
""")


def _run_everywhere(tmp_path: Path, tamesu: Any) -> tuple[str, dict[Path, str]]:
    summary = tmp_path / "github-summary.md"
    result = tamesu(["run", "-vv", "--out", "out", "--report", "junit,html,json,markdown,github"], cwd=tmp_path,
                    env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true", "OPENAI_API_KEY": ""})
    written = everything_written(tmp_path, tmp_path / ".env", tmp_path / "suite.yaml", tmp_path / "tamesu.yaml")
    return result.stdout + result.stderr, written


@pytest.fixture
def judge_url(serve: Serve) -> str:
    server = OpenAIServer()
    return server.base_url(serve(server.app).url)


def test_an_agent_echoing_a_secret_in_every_form_leaks_none(tmp_path: Path, tamesu: Any, serve: Serve,
                                                            judge_url: str) -> None:
    agent = serve(Starlette(routes=[Route("/chat", _echo_everywhere, methods=["POST"])])).url
    _project(tmp_path, judge_url, f"    type: rest\n    url: '{agent}/chat'\n"
                                  "    request: { body: { message: '{{message}}', token: '{{secrets.BOT_TOKEN}}' } }")
    output, written = _run_everywhere(tmp_path, tamesu)
    assert "plain *** | path *** | form *** | b64 *** | basic dTp***" in output, output
    assert "| hex *** | signed 0x7369673A***" in output, output
    assert leaks(output) == []
    cache = [p for p in written if ".tamesu" in p.parts]
    assert cache, "the judge's answer was not recorded"
    assert any(p.name == "github-summary.md" for p in written)
    assert {str(p.relative_to(tmp_path)): leaks(text) for p, text in written.items() if leaks(text)} == {}


def test_the_judge_model_is_never_sent_a_secret_the_agent_repeated(tmp_path: Path, tamesu: Any,
                                                                   serve: Serve) -> None:
    # before: every file showed ***, but the judge's request held the token as the agent echoed it, in every form:
    # to a hosted model, the secret left the machine
    judge = OpenAIServer()
    judge_url = judge.base_url(serve(judge.app).url)
    agent = serve(Starlette(routes=[Route("/chat", _echo_everywhere, methods=["POST"])])).url
    _project(tmp_path, judge_url, f"    type: rest\n    url: '{agent}/chat'\n"
                                  "    request: { body: { message: '{{message}}', token: '{{secrets.BOT_TOKEN}}' } }")
    _run_everywhere(tmp_path, tamesu)
    sent = [json.dumps(call.body, ensure_ascii=False) for call in judge.calls()]
    assert sent and all("plain ***" in body for body in sent), sent
    assert [leaks(body) for body in sent if leaks(body)] == []


def test_tamesus_cannot_reach_line_leaks_no_encoded_secret(tmp_path: Path, tamesu: Any, judge_url: str) -> None:
    port = refused_port()
    _project(tmp_path, judge_url, f"    type: rest\n    url: 'http://127.0.0.1:{port}/chat/{{{{secrets.BOT_TOKEN}}}}'\n"
                                  "    connect: { attempts: 1 }")
    output, written = _run_everywhere(tmp_path, tamesu)
    assert "cannot reach http://127.0.0.1" in output, output
    assert leaks(output) == [], output
    assert {str(p.relative_to(tmp_path)): leaks(text) for p, text in written.items() if leaks(text)} == {}


def test_a_secret_in_a_query_with_a_space_and_an_ampersand_leaks_nothing(tmp_path: Path, tamesu: Any,
                                                                         judge_url: str) -> None:
    # before: written into a query, `Zq9 pass&word` came back as `Zq9+pass&word` (the space as a form's `+`,
    # the `&` left as the separator it became), which no form of the mask matched: console, results, reports
    secret = "Zq9 pass&word"
    _project(tmp_path, judge_url, f"    type: rest\n    url: 'http://127.0.0.1:{refused_port()}/chat?key="
                                  "{{secrets.BOT_TOKEN}}'\n    connect: { attempts: 1 }")
    (tmp_path / ".env").write_text(f"BOT_TOKEN='{secret}'\n")
    output, written = _run_everywhere(tmp_path, tamesu)
    assert "cannot reach http://127.0.0.1" in output, output
    shapes = [secret, "Zq9+pass&word", "Zq9%20pass&word", "Zq9+pass%26word"]
    assert [shape for shape in shapes if shape in output] == [], output
    assert {str(p.relative_to(tmp_path)): shape for p, text in written.items() for shape in shapes
            if shape in text} == {}


def test_a_secret_cut_by_an_excerpt_leaks_no_part(tmp_path: Path, tamesu: Any, judge_url: str, serve: Serve) -> None:
    # before: a reason's excerpt was shortened before it was masked: "Bearer supersecret-token…", the first 17 of
    # the 21 characters in the console, the reports, results.jsonl and result.json
    secret = "supersecret-token-123"

    async def echo(request: Request) -> JSONResponse:
        said = "Order ORD-1001 has shipped, arriving Friday,  your token is Bearer "  # the excerpt ends in the token
        return JSONResponse({"text": said + (await request.json())["token"] + " thanks"})

    agent = serve(Starlette(routes=[Route("/chat", echo, methods=["POST"])])).url
    _project(tmp_path, judge_url, f"    type: rest\n    url: '{agent}/chat'\n"
                                  "    request: { body: { message: '{{message}}', token: '{{secrets.BOT_TOKEN}}' } }",
             assertion="not_contains: Friday")
    (tmp_path / ".env").write_text(f"BOT_TOKEN={secret}\n")
    output, written = _run_everywhere(tmp_path, tamesu)
    # cut where the excerpt ends (at a word: before the token, or after it masked), and masked
    assert "your token is Bearer…" in output or "your token is Bearer ***…" in output, output
    part = secret[:8]
    assert part not in output
    assert [str(p.relative_to(tmp_path)) for p, text in written.items() if part in text] == []


def _card_then_404(agent_url: str) -> Starlette:
    """An A2A agent whose card offers HTTP+JSON at a URL holding the secret, and which answers 404 there:
    a2a-sdk's client then raises "Resource not found: <the URL as httpx encoded it>"."""
    card = {"name": "gone", "description": "moved away", "version": "1", "capabilities": {},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": [],
            "supportedInterfaces": [{"url": agent_url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]}

    async def answer(request: Request) -> Any:
        if request.url.path == "/.well-known/agent-card.json":
            return JSONResponse(card)
        # an A2A error in it: the agent's own answer (a bare 404 is where tamesu was sent, said without the URL)
        return JSONResponse({"error": {"code": -32601, "message": "no such agent"}}, status_code=404)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


def test_an_sdk_error_quoting_the_encoded_url_leaks_nothing(tmp_path: Path, tamesu: Any, serve: Serve,
                                                            judge_url: str) -> None:
    app = Starlette()
    server = serve(app)
    target_url = f"{server.url}/agents/{SECRET}"
    app.router.routes.extend(_card_then_404(target_url).router.routes)
    _project(tmp_path, judge_url, f"    type: a2a\n    url: '{server.url}/agents/{{{{secrets.BOT_TOKEN}}}}'")
    output, written = _run_everywhere(tmp_path, tamesu)
    assert "Resource not found: http://" in output, output
    assert leaks(output) == [], output
    assert {str(p.relative_to(tmp_path)): leaks(text) for p, text in written.items() if leaks(text)} == {}


def test_log_lines_of_libraries_are_masked() -> None:
    redactor = Redactor()
    redactor.add(SECRET)
    stream = io.StringIO()
    handler = mask_logging(redactor, stream)
    try:
        try:
            raise ValueError(f"bad token {quote(SECRET)}")
        except ValueError:
            logging.getLogger("a2a.client.transports.rest").warning(
                "request to %s failed", f"http://127.0.0.1/a/{quote(SECRET, safe='/+@!$&()*,;=:~')}", exc_info=True)
    finally:
        logging.getLogger().removeHandler(handler)
    written = stream.getvalue()
    assert "WARNING a2a.client.transports.rest: request to http://127.0.0.1/a/*** failed" in written
    assert "ValueError: bad token ***" in written and leaks(written) == []


def test_in_json_tells_a_record_holding_a_secret_anywhere() -> None:
    """The store masks only records whose JSON text shows a secret: the search must find it in any string or
    key, in any form, however JSON escapes it (the secret has quotes and a non-ASCII letter)."""
    redactor = Redactor()
    redactor.add(SECRET)
    holding = [{"text": f"before{SECRET}after"}, {"runs": [1, {"deep": [None, SECRET + "\n"]}]}, {SECRET: 1},
               {"b": forms(SECRET)["base64"]}, {"p": f"/x/{forms(SECRET)['path-encoded']}"},
               {"j": f'said "{forms(SECRET)["JSON-escaped"]}"'}]
    clean = [{"text": "tok en/7+ q ü-4711"}, {"n": 4711, "l": ["tok", "en"]}, {}]
    for record in holding + clean:
        shown = redactor.in_json(json.dumps(record, ensure_ascii=False))
        assert shown == (record in holding) == (redactor.data(record) != record), record
    assert not Redactor().in_json(json.dumps(holding))


async def _stream_in_pieces(request: Request) -> PlainTextResponse:
    # as a model streams a key: a token per event, the secret cut between two of them
    token = (await request.json())["token"]
    pieces = ["my token is ", token[:7], token[7:], " and that is all"]
    body = "".join(f"data: {json.dumps({'delta': piece})}\n\n" for piece in pieces)
    return PlainTextResponse(body, media_type="text/event-stream")


def test_a_secret_streamed_in_pieces_leaks_no_piece(tmp_path: Path, tamesu: Any, serve: Serve,
                                                     judge_url: str) -> None:
    # the turn's joined text was masked, but result.json kept the raw events: `tok en/` then `+"q"ü-4711`
    agent = serve(Starlette(routes=[Route("/chat", _stream_in_pieces, methods=["POST"])])).url
    _project(tmp_path, judge_url, f"    type: rest\n    url: '{agent}/chat'\n    streaming: sse\n"
                                  "    response: { delta: $.delta }\n"
                                  "    request: { body: { message: '{{message}}', token: '{{secrets.BOT_TOKEN}}' } }",
             assertion="contains: 'that is all'")
    output, written = _run_everywhere(tmp_path, tamesu)
    assert "my token is *** and that is all" in output, output
    head, tail = SECRET[:7], json.dumps(SECRET[7:], ensure_ascii=False)[1:-1]
    [result] = [text for p, text in written.items() if p.name == "result.json"]
    assert '"delta": "***"' in result, result
    assert {str(p.relative_to(tmp_path)): [piece for piece in (head, tail, SECRET[7:]) if piece in text]
            for p, text in written.items() if head in text or tail in text or SECRET[7:] in text} == {}


async def _echo_query(request: web.Request) -> web.Response:
    # what an aiohttp agent logs or repeats of the URL it was called at: its query as yarl decodes it (the
    # query's own `&+=;` kept encoded), the path with it, the URL as yarl shows it to a human, and as received
    url = request.rel_url
    return web.Response(text=f"qs {request.query_string} | path {request.path_qs} | human {url.human_repr()} | "
                             f"raw {url.raw_query_string} | again {URL('/x').with_query(key=request.query['key'])}")


async def test_a_secret_in_a_query_echoed_as_the_agent_reads_it_leaks_nothing(tmp_path: Path, tamesu: Any,
                                                                             judge_url: str) -> None:
    # before: sent as `?key=s3cr%26t%2Bk%23y%20`, the agent's `request.query_string` is `key=s3cr%26t%2Bk#y `
    # (yarl keeps only the query's own `&+=;` encoded) and its URL shown to a human `s3cr%26t%2Bk%23y `: no form
    # of the mask, and the run folder, the console and the reports held the secret
    secret = "s3cr&t+k#y "
    app = web.Application()
    app.router.add_post("/chat", _echo_query)
    async with TestServer(app, host="127.0.0.1") as server:
        _project(tmp_path, judge_url, f"    type: rest\n    url: 'http://127.0.0.1:{server.port}/chat?key="
                                      "{{secrets.BOT_TOKEN}}'", assertion="contains: 'qs key='")
        (tmp_path / ".env").write_text(f"BOT_TOKEN='{secret}'\n")
        output, written = await asyncio.to_thread(_run_everywhere, tmp_path, tamesu)
    assert "qs key=*** | path /chat?key=*** | human /chat?key=*** | raw key=*** | again /x?key=***" in output, output
    shapes = [secret, secret.strip(), "s3cr%26t%2Bk#y", "s3cr%26t%2Bk%23y", "s3cr%26t%2bk#y", "s3cr%26t%2Bk%23y+"]
    assert [shape for shape in shapes if shape in output] == [], output
    assert {str(p.relative_to(tmp_path)): shape for p, text in written.items() for shape in shapes
            if shape in text} == {}


@pytest.mark.parametrize("shown", ["s3cr%26t%2Bk#y ", "s3cr%26t%2Bk#y%20", "s3cr%26t%2Bk#y+", "s3cr%26t%2bk#y%20",
                                   "s3cr%26t%2Bk%23y ", "s3cr%26t%2bk%23y+", "s3cr%26t%2Bk%23y+"])
def test_a_query_read_back_half_decoded_is_masked(shown: str) -> None:
    redactor = Redactor()
    redactor.add("s3cr&t+k#y ")
    assert redactor.text(f"said key={shown}| end") == "said key=***| end"


def test_a_query_value_as_yarl_writes_it_is_masked() -> None:
    # yarl (aiohttp's `params=`, `with_query`) keeps `:@/?` and encodes `&`: `u:p@ss%26w0rd`, no other encoder's form
    secret = "u:p@ss&w0rd"
    redactor = Redactor()
    redactor.add(secret)
    written = URL("/x").with_query(key=secret).raw_query_string
    assert written == "key=u:p@ss%26w0rd"
    assert redactor.text(written) == "key=***"
