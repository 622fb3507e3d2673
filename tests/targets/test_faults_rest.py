"""The rest target against an agent written to misbehave: each fault is reported as what it is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from sessions import events, new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.net.serve import ThreadServer
from tamesu.results.records import RunResult
from targets.test_rest_target import make_session, opened


async def _malformed(_: Request) -> Response:
    body = '{"text": "Your order has shipped", "tool_calls": [{"name": "lookup"'
    return Response(body, media_type="application/json")


async def _cut_in_a_string(_: Request) -> Response:
    return Response('{"text": "Your order', media_type="application/json")


async def _other_keys(_: Request) -> Response:
    return JSONResponse({"answer_text": "hello", "session": "s-1", "confidence": 0.9})


async def _reply_key(_: Request) -> Response:
    return JSONResponse({"reply": "hello from reply", "id": 7})


async def _ollama_shaped(_: Request) -> Response:
    return JSONResponse({"model": "m", "message": {"role": "assistant", "content": "hello from ollama"}, "done": True})


async def _langserve_shaped(_: Request) -> Response:
    return JSONResponse({"output": {"content": "hello from langserve", "type": "ai"}, "metadata": {"run_id": "r"}})


async def _tools_only(_: Request) -> Response:
    return JSONResponse({"tool_calls": [{"name": "lookup", "args": {}}]})


async def _loop(_: Request) -> Response:
    return RedirectResponse("/loop", status_code=307)


async def _moved(_: Request) -> Response:
    return RedirectResponse("/reply", status_code=307)


async def _broken_error(_: Request) -> Response:
    return Response('{"error": "db', status_code=503, media_type="application/json")


async def _huge(_: Request) -> Response:
    return JSONResponse({"text": "word " * 600_000, "tool_calls": []})  # 3 MB


async def _sign_in_page(_: Request) -> Response:
    return HTMLResponse("\n<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>\n<title>\n  Sign in &ndash; "
                        "Acme SSO\n</title></head><body><form>...</form></body></html>")


async def _proxy_error_page(_: Request) -> Response:
    return HTMLResponse("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway"
                        "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", status_code=502)


async def _crash_trace(_: Request) -> Response:
    return PlainTextResponse("Traceback (most recent call last):\n  File \"app.py\", line 9, in chat\n"
                             "KeyError: 'order'\n", status_code=500)


async def _html_reply(_: Request) -> Response:
    return HTMLResponse("<p>Your order <b>A-1</b> has shipped.</p>")


async def _locked(_: Request) -> Response:
    return Response("sign in first", status_code=401, media_type="text/plain")


async def _json_404(_: Request) -> Response:
    return JSONResponse({"error": "no such order"}, status_code=404)


async def _deep(request: Request) -> Response:
    depth = int(request.query_params["depth"])
    return Response('{"text": "hi", "data": ' + "[" * depth + "]" * depth + "}", media_type="application/json")


async def _deep_arguments(request: Request) -> Response:
    """A tool call whose arguments, JSON text as OpenAI writes them, nest `depth` levels (or hold a long number)."""
    depth = request.query_params.get("depth")
    arguments = '{"a":' * int(depth) + "1" + "}" * int(depth) if depth else '{"n": ' + "9" * 5000 + "}"
    return JSONResponse({"text": "looked", "tool_calls": [{"name": "lookup", "arguments": arguments}]})


async def _long_number(_: Request) -> Response:
    return Response('{"text": "hi", "n": ' + "9" * 5000 + "}", media_type="application/json")


_OPEN_KEY = "zq7-open-5e0c-9981"


async def _open_refused(_: Request) -> Response:
    # a backend's error over lines, quoting the key it was sent where a cut at 200 characters falls
    return PlainTextResponse("no such tenant:\n" + "x" * 172 + f" {_OPEN_KEY} was the key", status_code=403)


async def _nameless_call(_: Request) -> Response:
    # a tool call without a name, whose arguments quote a key where a cut at 200 characters falls
    return JSONResponse({"text": "ok", "tool_calls": [{"args": {"note": "x " * 80, "key": _OPEN_KEY}}]})


def _app() -> Starlette:
    routes = [("/locked", _locked), ("/json-404", _json_404), ("/deep", _deep), ("/long-number", _long_number),
              ("/deep-arguments", _deep_arguments),
              ("/huge", _huge), ("/malformed", _malformed), ("/cut", _cut_in_a_string),
              ("/other", _other_keys), ("/reply", _reply_key),
              ("/tools", _tools_only), ("/sign-in", _sign_in_page), ("/html-reply", _html_reply),
              ("/ollama", _ollama_shaped), ("/langserve", _langserve_shaped),
              ("/loop", _loop), ("/moved", _moved), ("/broken-error", _broken_error),
              ("/proxy-error", _proxy_error_page), ("/crash-trace", _crash_trace), ("/open-refused", _open_refused),
              ("/nameless", _nameless_call)]
    return Starlette(routes=[Route(path, handler, methods=["POST"]) for path, handler in routes])


@pytest.fixture(scope="module")
def faulty() -> Iterator[str]:
    with ThreadServer(_app()) as server:
        yield server.url


async def test_a_refused_session_open_is_one_line_that_never_says_the_start_of_a_secret(tmp_path: Path,
                                                                                      faulty: str) -> None:
    # before: its first 200 characters as they came, line breaks too, then masked: the key the cut fell in was
    # said up to the cut ("zq7-open-5e0c")
    session = new_session(tmp_path, environ={"OPEN_KEY": _OPEN_KEY})
    spec = {"url": f"{faulty}/chat", "session": {"open": {"url": "/open-refused",
                                                          "headers": {"X-Key": "{{secrets.OPEN_KEY}}"}}}}
    with pytest.raises(InfraError) as caught:
        async with opened(spec, session):
            pass
    said = str(caught.value)
    assert said.endswith(f"/open-refused answered HTTP 403, not a 2xx: no such tenant: {'x' * 172}…"), said
    assert _OPEN_KEY[:6] not in said, said
    # the same request made for any other target (an mcp, a2a or voice target's session.open)
    from tamesu.targets.base import SessionOpenSpec
    from tamesu.targets.session_open import open_session

    opening = SessionOpenSpec.model_validate(spec["session"]["open"] | {"url": f"{faulty}/open-refused"})
    with pytest.raises(InfraError) as caught:
        await open_session(opening, session, "mcp target m")
    said = str(caught.value)
    assert said.endswith(f"/open-refused answered HTTP 403, not a 2xx: no such tenant: {'x' * 172}…"), said
    assert _OPEN_KEY[:6] not in said, said


async def test_a_nameless_tool_call_is_quoted_cut_at_a_word_never_saying_the_start_of_a_secret(
        tmp_path: Path, faulty: str) -> None:
    # before: its JSON cut bare at 200 characters, before the masking: the key the cut fell in was said up to it
    session = new_session(tmp_path, environ={"OPEN_KEY": _OPEN_KEY})
    async with opened({"url": f"{faulty}/nameless"}, session) as target:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="hi"))
    said = session.redactor.text(str(caught.value))
    assert said.startswith('response.tool_calls ($.tool_calls): a call without a name: {"args": {"note": "x x'), said
    assert said.endswith('x x ", "key":…') and _OPEN_KEY[:6] not in said, said


async def _turn_error(tmp_path: Path, spec: dict[str, Any]) -> TurnError:
    async with opened(spec, make_session(tmp_path)) as target:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="hi"))
    return caught.value


async def test_a_web_page_for_an_answer_is_where_tamesu_was_sent_naming_the_page(tmp_path: Path,
                                                                                  faulty: str) -> None:
    # no agent answered (a sign-in page, the site instead of its API): an infrastructure error naming the url and
    # the page (exit 3), as a 404 is; it was the agent's failed turn (exit 1)
    async with opened({"url": f"{faulty}/sign-in"}, make_session(tmp_path)) as target:
        with pytest.raises(InfraError) as caught:
            await target.send(UserTurn(text="hi"))
    assert str(caught.value).startswith(f"{faulty}/sign-in answered HTTP 200 with a web page, titled 'Sign in "
                                        "\u2013 Acme SSO', not an agent's reply: is url the agent's API"), \
        str(caught.value)
    # a password holding `/` in the url's user:password@ (sent percent-encoded): the url said is where the request
    # went, its user:password@ as `***@`; before, rendered as text for the message, its `/` ended the host: the
    # url said was `http://u:***@...`, the user named and the masked password read as a port
    password = "S3c/r3t-of-the-sso"
    session = new_session(tmp_path / "pw", environ={"PW": password})
    with_password = faulty.replace("http://", "http://u:{{secrets.PW}}@")
    async with opened({"url": f"{with_password}/sign-in"}, session) as target:
        with pytest.raises(InfraError) as caught:
            await target.send(UserTurn(text="hi"))
    shown = faulty.replace("http://", "http://***@")
    assert str(caught.value).startswith(f"{shown}/sign-in answered HTTP 200 with a web page"), str(caught.value)
    # an agent whose reply is marked up (a fragment, not a page) is still the agent's words
    async with opened({"url": f"{faulty}/html-reply"}, make_session(tmp_path)) as target:
        turn = await target.send(UserTurn(text="hi"))
    assert turn.text == "<p>Your order <b>A-1</b> has shipped.</p>"


def test_a_long_page_title_is_cut_at_a_word_with_an_ellipsis() -> None:
    from tamesu.targets._web_page import page_title

    # it was cut at 80 characters mid-word and without a sign of the cut: "...Sign in to your acco"
    title = "Acme Corporation &ndash; Customer Portal &ndash; Sign in to your account to continue to the dashboard"
    assert page_title(f"<html><head><title>\n  {title}\n</title></head></html>") == (
        "Acme Corporation \u2013 Customer Portal \u2013 Sign in to your account to continue to the…")


async def test_a_5xx_answer_is_said_in_one_line_a_proxys_error_page_by_its_title(tmp_path: Path, faulty: str) -> None:
    # before: a proxy's HTML error page or the agent's traceback was put in the failure as it came, over many lines
    error = await _turn_error(tmp_path, {"url": f"{faulty}/proxy-error"})
    assert str(error) == "the agent answered HTTP 502 with a web page, titled '502 Bad Gateway'", str(error)
    assert error.status == 502 and "<center>" in str(error.raw)  # the page itself is kept with the failed turn
    error = await _turn_error(tmp_path, {"url": f"{faulty}/crash-trace"})
    assert str(error) == ("the agent answered HTTP 500: Traceback (most recent call last): File \"app.py\", line 9, "
                          "in chat KeyError: 'order'"), str(error)


async def test_a_refusal_with_no_json_is_where_tamesu_was_sent_not_the_agents_answer(tmp_path: Path,
                                                                                     faulty: str) -> None:
    # before: "Not Found" was the agent's reply, and a test with few checks passed against the wrong server
    for path, said in [("/nowhere", "HTTP 404 (Not Found): does url name the agent's endpoint?"),
                       ("/locked", "HTTP 401 (sign in first): check the target's headers (a token?)")]:
        async with opened({"url": f"{faulty}{path}"}, make_session(tmp_path)) as target:
            with pytest.raises(InfraError) as caught:
                await target.send(UserTurn(text="hi"))
        assert str(caught.value).startswith(f"the agent's server refused the request at {faulty}{path}: {said}"), \
            str(caught.value)
    # an agent's own refusal in JSON stays its answer, with its status
    async with opened({"url": f"{faulty}/json-404", "response": {"text": "$.error"}}, make_session(tmp_path)) as target:
        turn = await target.send(UserTurn(text="hi"))
    assert (turn.text, turn.status) == ("no such order", 404)


async def test_a_json_answer_that_is_not_json_fails_the_turn(tmp_path: Path, faulty: str) -> None:
    error = await _turn_error(tmp_path, {"url": f"{faulty}/malformed"})
    assert str(error).startswith("malformed JSON in the answer (application/json): ")
    assert "Your order has shipped" in str(error)  # an excerpt of what came
    # json's own words end in "at" where the position is where the string began: it was "starting at at line"
    error = await _turn_error(tmp_path, {"url": f"{faulty}/cut"})
    assert str(error) == ('malformed JSON in the answer (application/json): Unterminated string starting at line 1 '
                          'column 10: {"text": "Your order')


async def test_an_error_page_that_claims_json_is_reported_by_its_status(tmp_path: Path, faulty: str) -> None:
    error = await _turn_error(tmp_path, {"url": f"{faulty}/broken-error"})
    assert "the agent answered HTTP 503" in str(error)


async def test_response_text_that_finds_nothing_names_the_keys_there(tmp_path: Path, faulty: str) -> None:
    error = await _turn_error(tmp_path, {"url": f"{faulty}/other", "response": {"text": "$.reply"}})
    assert str(error) == ("response.text ($.reply) found nothing in the JSON answer; its keys: answer_text, "
                          "session, confidence: set response.text to the field with the reply")


async def test_an_unset_response_text_finds_a_common_field_and_says_which(tmp_path: Path, faulty: str) -> None:
    session = make_session(tmp_path)
    async with opened({"url": f"{faulty}/reply"}, session) as target:
        first = await target.send(UserTurn(text="hi"))
        await target.send(UserTurn(text="again"))
    assert first.text == "hello from reply"
    detected = events(session, "text_detected")
    assert len(detected) == 1 and detected[0]["path"] == "$.reply"  # said once, not on every turn
    # a common field holding an object is not the reply: its text is (before: the object's JSON was the reply)
    for path, said, where in (("ollama", "hello from ollama", "$.message.content"),
                              ("langserve", "hello from langserve", "$.output.content")):
        session = make_session(tmp_path)
        async with opened({"url": f"{faulty}/{path}"}, session) as target:
            assert (await target.send(UserTurn(text="hi"))).text == said
        assert events(session, "text_detected")[0]["path"] == where
    # the same answer with the path set elsewhere is not guessed at
    error = await _turn_error(tmp_path, {"url": f"{faulty}/reply", "response": {"text": "$.text"}})
    assert "its keys: reply, id" in str(error)
    # unset, and no common field either: said in the result, not a failed turn (helpers answer with data)
    session = make_session(tmp_path)
    async with opened({"url": f"{faulty}/other"}, session) as target:
        assert (await target.send(UserTurn(text="hi"))).text == ""
    [missing] = events(session, "text_not_found")
    assert missing["note"] == "response.text ($.text) found nothing in the JSON answer; its keys: answer_text, " \
        "session, confidence"


async def test_an_answer_with_only_tool_calls_is_not_a_fault(tmp_path: Path, faulty: str) -> None:
    async with opened({"url": f"{faulty}/tools"}, make_session(tmp_path)) as target:
        turn = await target.send(UserTurn(text="hi"))
    assert turn.text == "" and [c.name for c in turn.tool_calls] == ["lookup"]


async def test_a_redirect_loop_is_reported_as_one(tmp_path: Path, faulty: str) -> None:
    error = await _turn_error(tmp_path, {"url": f"{faulty}/loop"})
    assert "a redirect loop (more than 10 redirects)" in str(error)
    async with opened({"url": f"{faulty}/moved"}, make_session(tmp_path)) as target:
        assert (await target.send(UserTurn(text="hi"))).text == "hello from reply"  # one redirect is followed


def test_json_deeper_or_longer_than_python_reads_fails_the_turn(tmp_path: Path, faulty: str, tamesu: Any) -> None:
    # before: 100,000 levels and a 5,000-digit number were `internal error: RecursionError` / `ValueError`
    # (fault: environment, exit 3), and 900 levels, which Python reads, ended the whole run:
    # `tamesu: internal error: PydanticSerializationError: ... Maximum serialization depth exceeded`
    (tmp_path / "deep.tamesu.yaml").write_text(f"""\
targets:
  deep: {{ type: rest, url: "{faulty}/deep?depth=100000" }}
  nested: {{ type: rest, url: "{faulty}/deep?depth=900" }}
  fine: {{ type: rest, url: "{faulty}/deep?depth=150" }}
  long: {{ type: rest, url: "{faulty}/long-number" }}
tests:
  - {{ name: deep, target: deep, scenario: {{ script: [{{ say: hi }}] }} }}
  - {{ name: nested, target: nested, scenario: {{ script: [{{ say: hi }}] }} }}
  - {{ name: fine, target: fine, scenario: {{ script: [{{ say: hi }}] }}, assert: [{{ contains: hi }}] }}
  - {{ name: long, target: long, scenario: {{ script: [{{ say: hi }}] }} }}
""")
    done = tamesu(["run", "deep.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr, done.stdout + done.stderr
    rows = {row["test"]: row for row in map(json.loads, next((tmp_path / "out").glob("*/results.jsonl"))
                                            .read_text().splitlines())}
    assert {name: row["status"] for name, row in rows.items()} == {
        "deep": "failed", "nested": "failed", "fine": "passed", "long": "failed"}
    said = {line.split(": JSON in the answer that cannot be read (application/json): ")[1].split(":")[0]
            for line in done.stdout.splitlines() if "cannot be read" in line}
    assert said == {"nested too deeply", "nested more than 200 levels deep", "a number of more than 4,300 digits"}


def test_tool_call_arguments_deeper_or_longer_than_python_reads_fail_the_turn(tmp_path: Path, faulty: str,
                                                                              tamesu: Any) -> None:
    # before: arguments 250 levels deep were `internal error: ValueError: Maximum serialization depth exceeded`
    # (when the run's records were written), 1,500 levels `internal error: RecursionError`, both fault:
    # environment, exit 3: the agent's tool call, blamed on tamesu
    (tmp_path / "args.tamesu.yaml").write_text(f"""\
targets:
  nested: {{ type: rest, url: "{faulty}/deep-arguments?depth=250" }}
  deep: {{ type: rest, url: "{faulty}/deep-arguments?depth=1500" }}
  long: {{ type: rest, url: "{faulty}/deep-arguments" }}
  fine: {{ type: rest, url: "{faulty}/deep-arguments?depth=150" }}
tests:
  - {{ name: nested, target: nested, scenario: {{ script: [{{ say: hi }}] }} }}
  - {{ name: deep, target: deep, scenario: {{ script: [{{ say: hi }}] }} }}
  - {{ name: long, target: long, scenario: {{ script: [{{ say: hi }}] }} }}
  - {{ name: fine, target: fine, scenario: {{ script: [{{ say: hi }}] }}, assert: [{{ tool_called: lookup }}] }}
""")
    done = tamesu(["run", "args.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr, done.stdout + done.stderr
    rows = {row["test"]: row for row in map(json.loads, next((tmp_path / "out").glob("*/results.jsonl"))
                                            .read_text().splitlines())}
    assert {name: (row["status"], row["runs"][0].get("fault")) for name, row in rows.items()} == {
        "nested": ("failed", "agent"), "deep": ("failed", "agent"), "long": ("failed", "agent"),
        "fine": ("passed", None)}
    said = {line.split("the agent called lookup with arguments that cannot be read: ")[1].split(":")[0]
            for line in done.stdout.splitlines() if "cannot be read" in line}
    assert said == {"JSON nested more than 200 levels deep", "JSON nested more levels deep than Python reads",
                    "a number of more than 4,300 digits"}


def test_tamesu_test_against_a_url_says_where_it_read_the_reply(tmp_path: Path, faulty: str, tamesu: Any) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "hello", "input": "hi", "assert": [{"type": "contains",
                                                                             "value": "hello from reply"}]}) + "\n")
    done = tamesu(["test", "-i", str(cases), "-n", f"{faulty}/reply", "-o", str(tmp_path / "out.jsonl")],
                  cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [detail] = [json.loads(p.read_text()) for p in tmp_path.rglob("result.json")]
    [detected] = [e for e in detail["events"] if e["name"] == "text_detected"]
    assert detected["data"]["path"] == "$.reply"


def test_a_large_answer_is_written_once_per_artifact(tmp_path: Path, faulty: str, tamesu: Any) -> None:
    (tmp_path / "huge.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{faulty}/huge" }}
tests:
  - name: big
    target: bot
    scenario: {{ script: [{{ say: hi }}] }}
    assert: [{{ contains: word }}]
""")
    done = tamesu(["run", "huge.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = list((tmp_path / "out").glob("*/huge/big/run-1"))
    answer = 3_000_000  # the JSON document's text field; text, response and raw each held all of it before
    written = (run / "result.json").stat().st_size
    assert answer < written < answer + 100_000
    assert answer < (run / "transcript.json").stat().st_size < answer + 100_000  # another artifact: once there
    agent = json.loads((run / "result.json").read_text())["turns"][0]["agent"]
    assert agent["response"] == {"text": {"$ref": "text"}, "tool_calls": []}
    assert agent["raw"] == [{"$ref": "response"}]
    detail = RunResult.model_validate_json((run / "result.json").read_text())  # what every reader loads
    turn = detail.turns[0].agent
    assert turn.text == "word " * 600_000 and turn.response == {"text": turn.text, "tool_calls": []}
    assert turn.raw == [turn.response]
    report = run.parents[2] / "report.html"
    again = tamesu(["report", str(run.parents[2]), "--report", f"html:{run.parents[2]}/again.html"], cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (run.parents[2] / "again.html").read_text() == report.read_text()  # rendered from the artifacts
    assert "word word word" in report.read_text()
