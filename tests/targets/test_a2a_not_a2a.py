"""An a2a target whose url is served by something that is no A2A endpoint at all (a web site, another JSON API, a
plain-text health check): no agent read the request, so the run is an infrastructure error (exit 3) in one line
naming the url and what came back, whatever the binding, as a 404 or a 405 is; not the agent's failure (exit 1,
before). An A2A answer gone wrong stays the agent's (`test_a2a_target.py`). Every server here is a real local one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from conftest import why
from sessions import events, new_session
from tamesu.conversation import TurnError, UserTurn
from tamesu.errors import InfraError
from targets.test_a2a_target import make_session, opened

PAGE = "<!doctype html><html><head><title>Welcome to nginx!</title></head><body>It works.</body></html>"


def _site() -> Starlette:
    """Every path of `/html/`, `/json/`, `/text/` answers GET and POST with a page, a JSON object of its own
    API, plain text; `/get/` answers GET only (405 to a POST)."""

    async def page(request: Request) -> Response:
        return Response(PAGE, media_type="text/html")

    async def api(request: Request) -> Response:
        return JSONResponse({"status": "ok", "items": []})

    async def text(request: Request) -> Response:
        return PlainTextResponse("Hello, world")

    both = ["GET", "POST"]
    return Starlette(routes=[Route("/html/{rest:path}", page, methods=both),
                             Route("/json/{rest:path}", api, methods=both),
                             Route("/text/{rest:path}", text, methods=both),
                             Route("/get/{rest:path}", text, methods=["GET"])])


CAME_BACK = {
    "html": "HTTP 200 and a web page titled 'Welcome to nginx!' (text/html)",
    "json": "HTTP 200 and JSON that is not {shape} (application/json): '{{\"status\":\"ok\",\"items\":[]}}'",
    "text": "HTTP 200 and text, not JSON (text/plain): 'Hello, world'",
}


@pytest.mark.parametrize("kind", sorted(CAME_BACK))
@pytest.mark.parametrize("binding", [{"transport": "jsonrpc"}, {"transport": "http"},
                                     {"transport": "jsonrpc", "stream": True}, {}])
async def test_a_server_that_is_no_a2a_endpoint_is_where_tamesu_was_sent(tmp_path: Path, serve: Any, kind: str,
                                                                         binding: dict[str, Any]) -> None:
    base = serve(_site()).url
    url = f"{base}/{kind}/a2a"
    session = make_session(tmp_path)
    async with opened({"url": url, **binding}, session) as target:
        with pytest.raises(InfraError) as caught:
            await target.send(UserTurn(text="hello"))
    said = str(caught.value)
    http = binding.get("transport") == "http"
    at = f"{url}/message:send" if http else url
    shape = "A2A's HTTP+JSON" if http else "JSON-RPC"
    assert said.startswith(f"a2a target shop: {at} is not an A2A endpoint: it answered "
                           f"{'HTTP+JSON' if http else 'JSONRPC'} (A2A 1.0) with "
                           f"{CAME_BACK[kind].format(shape=shape)}"), said
    assert said.endswith("does url name the agent's A2A endpoint (a web page answers for a site, a sign-in or a "
                         "proxy; another API answers JSON of its own)?"), said
    assert "\n" not in said
    # its card places answered too, with no card: a site's page or its API's JSON is never taken for one
    assert not events(session, "card")
    [missing] = events(session, "card_missing")
    if kind == "html":
        assert f"{url}/.well-known/agent-card.json: a web page titled 'Welcome to nginx!', not JSON" in \
            missing["tried"], missing
    if kind == "json":
        assert any(t.startswith(f"{url}/.well-known/agent-card.json: not an agent card (no name, or none of ") and
                   t.endswith(": '{\"status\": \"ok\", \"items\": []}'") for t in missing["tried"]), missing
        assert "(and no agent card was found)" in said, said


async def test_json_rpc_gone_wrong_is_still_the_agents(tmp_path: Path, serve: Any) -> None:
    # a JSON-RPC envelope with no result: an A2A agent's broken answer, not a server of another kind
    async def endpoint(request: Request) -> Response:
        asked = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": asked["id"]})

    base = serve(Starlette(routes=[Route("/a2a", endpoint, methods=["POST"])])).url
    async with opened({"url": f"{base}/a2a"}, make_session(tmp_path)) as target:
        with pytest.raises(TurnError, match="Invalid JSON-RPC response: it has neither 'result' nor 'error'"):
            await target.send(UserTurn(text="hello"))


def test_a_run_against_a_web_site_is_exit_3_in_one_line(tmp_path: Path, tamesu, serve: Any) -> None:
    url = f"{serve(_site()).url}/html/a2a"
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: a2a, url: '{url}' }}
tests:
  - name: hello
    target: shop
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert:
      - contains: hello
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path)
    record = json.loads(next((tmp_path / "out").iterdir()).joinpath("results.jsonl").read_text().splitlines()[0])
    assert result.returncode == 3, why(record) + result.stdout + result.stderr
    run = record["runs"][0]
    assert run["status"] == "error" and run["fault"] == "environment", run
    assert run["error"].startswith(f"a2a target shop: {url} is not an A2A endpoint: it answered JSONRPC (A2A "
                                   "1.0) with HTTP 200 and a web page titled 'Welcome to nginx!'"), run["error"]
    assert [line for line in result.stdout.splitlines() if "is not an A2A endpoint" in line] == \
        [f"      ! {run['error']}"], result.stdout
    assert "Traceback" not in result.stdout + result.stderr


async def test_a_long_error_is_cut_at_a_word_and_never_says_the_start_of_a_secret(tmp_path: Path, serve: Any) -> None:
    # before: the agent's error message cut bare at 500 characters before the masking, which knows a cut secret
    # only by the `…` after its head: the key the cut fell in was said up to the cut
    key = "zq7-a2a-5e0c-91ab-77d2-key"

    async def endpoint(request: Request) -> Response:
        asked = await request.json()
        said = "x " * 245 + request.headers.get("x-key", "")
        return JSONResponse({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32603, "message": said}})

    base = serve(Starlette(routes=[Route("/a2a", endpoint, methods=["POST"])])).url
    session = new_session(tmp_path, environ={"A2A_KEY": key})
    async with opened({"url": f"{base}/a2a", "headers": {"X-Key": "{{secrets.A2A_KEY}}"}}, session) as target:
        with pytest.raises(TurnError) as caught:
            await target.send(UserTurn(text="hello"))
    said = session.redactor.text(str(caught.value))
    assert "x x x" in said and said.rstrip().endswith("x…"), said
    assert key[:6] not in said, said
