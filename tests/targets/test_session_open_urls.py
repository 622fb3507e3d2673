"""`session.open`: a URL a template makes that is no URL (its own, or a rest target's it is joined to) is the run's
error, one line, never an internal error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import run_tamesu

_SUITE = """
targets:
  bot: { type: model, model: bot, session: { open: { url: "{{env.OPEN_BASE}}/open" } } }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - { name: t, scenario: { script: [ { say: hi } ] }, assert: [ { contains: hello } ] }
"""


def test_a_url_a_template_makes_that_is_none_is_the_runs_error(tmp_path: Path) -> None:
    # before: 'internal error: InvalidURL: Invalid port: ':1' (traceback in run-1/traceback.txt)'
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"OPEN_BASE": "http://[::1"})
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert "model target bot: session.open POST http://[::1/open: not a URL that can be sent to (Invalid port: " \
           "':1')" in said, said
    assert "internal error" not in said


def test_a_rest_targets_url_that_is_none_is_said_before_its_session_open(tmp_path: Path) -> None:
    # before: 'internal error: InvalidURL: Invalid port: ':1'': session.open's path was joined to the target's url
    (tmp_path / "s.tamesu.yaml").write_text(
        'targets:\n  bot: { type: rest, url: "{{env.OPEN_BASE}}/chat", session: { open: { url: /open } } }\n'
        "tests:\n  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }\n")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"OPEN_BASE": "http://[::1"})
    said = done.stdout + done.stderr
    # since session 37 planning reads the url a variable made, before anything opens: the suite's error where written
    assert done.returncode == 2, said
    assert "s.tamesu.yaml:2:27: targets.bot.url: {{env.OPEN_BASE}} made it 'http://[::1/chat': not a URL" in said, said
    assert "internal error" not in said


def test_a_websocket_url_that_is_none_is_said_where_written(tmp_path: Path) -> None:
    # before: 'internal error: ValueError: Invalid IPv6 URL (traceback in run-1/traceback.txt)'
    (tmp_path / "s.tamesu.yaml").write_text(
        'targets:\n  bot: { type: rest, url: "{{env.OPEN_BASE}}/ws", streaming: websocket }\n'
        "tests:\n  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }\n")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"OPEN_BASE": "ws://[::1"})
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "s.tamesu.yaml:2:27: targets.bot.url: {{env.OPEN_BASE}} made it 'ws://[::1/ws': not a URL" in said, said
    assert "internal error" not in said


def test_a_voice_websocket_url_a_template_makes_that_is_none_is_one_line(tmp_path: Path) -> None:
    # before: 'internal error: ValueError: Invalid IPv6 URL' (the voice, realtime and pipecat websockets)
    (tmp_path / "s.tamesu.yaml").write_text(
        'targets:\n  bot: { type: voice, url: "{{env.BOT_URL}}" }\n'
        "tests:\n  - { name: t, target: bot, scenario: { script: [ { say: hello there } ] } }\n")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"BOT_URL": "ws://[::1"})
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "s.tamesu.yaml:2:28: targets.bot.url: {{env.BOT_URL}} made it 'ws://[::1': not a URL" in said, said
    assert "internal error" not in said


@pytest.mark.parametrize("endless", [False, True], ids=["17 MB", "endless"])
def test_an_answer_larger_than_session_open_reads_is_the_runs_error(tmp_path: Path, serve: Any,
                                                                    endless: bool) -> None:
    # before: a target that is not rest read session.open's answer whole, however large (an endless one until
    # session.open.timeout, held in memory): this one was read, all 17 MB, and its token taken
    from starlette.applications import Starlette
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    pad = b" " * 17_000_000

    async def spaces() -> AsyncIterator[bytes]:
        yield b'{"token": "t-1"'
        while True:
            yield pad[:1_000_000]

    async def opened(request: Any) -> Response:
        if endless:
            return StreamingResponse(spaces(), media_type="application/json")
        return Response(b'{"token": "t-1"' + pad + b"}", media_type="application/json")

    server = serve(Starlette(routes=[Route("/open", opened, methods=["POST"])]))
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace(
        '"{{env.OPEN_BASE}}/open" }', '"{{env.OPEN_BASE}}/open", capture: { token: $.token } }'))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"OPEN_BASE": server.url})
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert (f"model target bot: session.open POST {server.url}/open: the answer is larger than 16,000,000 bytes, "
            "more than session.open reads") in said, said


def test_a_password_holding_a_slash_in_session_opens_url_reaches_the_server(tmp_path: Path, serve: Any) -> None:
    # before: session.open's url rendered as text, the password written as is in `user:password@`: its `/` ended
    # the host early ("not a URL that can be sent to (Invalid port: 'op')", the password's head said); the url is
    # rendered as a rest target's is, each template of its user:password@ percent-encoded
    import base64

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    password = "S3c/r3t?pw#x"
    seen: list[str] = []

    async def opened(request: Request) -> JSONResponse:
        seen.append(request.headers.get("authorization", ""))
        return JSONResponse({"token": "t-1"})

    server = serve(Starlette(routes=[Route("/open", opened, methods=["POST"])]))
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace(
        '"{{env.OPEN_BASE}}/open" }', '"http://op:{{secrets.OPEN_PW}}@{{env.OPEN_HOST}}/open" }'))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path,
                      env={"OPEN_PW": password, "OPEN_HOST": server.url.removeprefix("http://")})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert seen == ["Basic " + base64.b64encode(f"op:{password}".encode()).decode()], seen
    assert "S3c" not in said
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"S3c" not in path.read_bytes(), path
