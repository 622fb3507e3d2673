"""A `user:password@` written in a URL tamesu renders itself (a rest listener's public url, a remote agent's
`forward`) is a credential whether or not the suite declares it a secret: it is sent, and it reaches neither the
console nor any file of the run folder. A template inside it is percent-encoded, as a rest target's url's is, so
a password holding a `/` is sent whole."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agents.fixtures import RunningAgents, rest_agents

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


def _free_port() -> int:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        return int(spare.getsockname()[1])


def _unsaid(word: str, said: str, out: Path) -> None:
    assert word not in said, said
    for path in out.rglob("*"):
        if path.is_file():
            assert word not in path.read_text(errors="replace"), path


def test_a_listeners_public_url_is_named_without_its_password(rest_agents: RunningAgents, tamesu: Callable,
                                                             tmp_path: Path) -> None:
    # before: the transport event's listen_url kept "http://hook:hunter2-pw@127.0.0.1:P/hook" in result.json, and
    # a password holding a `/` (a secret) ended the host early: the agent's posts went nowhere, each turn timed out
    port = _free_port()
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  plain:
    type: rest
    url: "{rest_agents.url}/bot"
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    response: {{ listen: {{ addr: "127.0.0.1:{port}", url: "http://hook:hunter2-pw@127.0.0.1:{port}/hook",
                          path: /hook, idle: 5s, done: $.end }} }}
    turn_timeout: 20s
  templated:
    type: rest
    url: "{rest_agents.url}/bot"
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    response: {{ listen: {{ addr: "127.0.0.1:{port}", url: "http://hook:{{{{secrets.HOOK_PW}}}}@127.0.0.1:{port}/hook",
                          path: /hook, idle: 5s, done: $.end }} }}
    turn_timeout: 20s
tests:
  - {{ name: plain, target: plain, scenario: {{ script: [ {{ say: bye }} ] }} }}
  - {{ name: templated, target: templated, scenario: {{ script: [ {{ say: bye }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"HOOK_PW": "s3c/ret?pw#0042"})
    assert result.returncode == 0, result.stdout + result.stderr
    runs = {(r := json.loads(p.read_text()))["test"]: r for p in (tmp_path / "out").rglob("result.json")}
    for name in ("plain", "templated"):
        transport = [e["data"] for e in runs[name]["events"] if e["name"] == "transport"]
        assert transport[0]["listen_url"] == f"http://***@127.0.0.1:{port}/hook", transport
        assert [turn["agent"]["text"] for turn in runs[name]["turns"]] == ["Bye"]
    _unsaid("hunter2-pw", result.stdout + result.stderr, tmp_path / "out")
    _unsaid("s3c", result.stdout + result.stderr, tmp_path / "out")


@pytest.mark.parametrize("password", ["hunter2-pw", "{{secrets.SHOP_PW}}"])
def test_a_remote_agents_forward_is_named_without_its_password(tamesu: Callable, tmp_path: Path,
                                                                password: str) -> None:
    # before: "remote agent shop: forward to http://shop:hunter2-pw@127.0.0.1:P/a2a: the real agent did not
    # answer" on the console and in result.json, and the remote_agent_started and forward_failed events kept it;
    # a templated password holding `/` ended the host early (rendered as text: 'Invalid port')
    port = _free_port()
    (tmp_path / "f.tamesu.yaml").write_text(f"""\
remote_agents:
  shop: {{ forward: "http://shop:{password}@127.0.0.1:{port}/a2a" }}
targets:
  rpc: {{ type: a2a, url: "{{{{remote.shop.url}}}}" }}
tests:
  - {{ name: through, target: rpc, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: x }} ] }}
""", encoding="utf-8")
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path, env={"SHOP_PW": "s3c/ret?pw#0042"})
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"! remote agent shop: forward to http://***@127.0.0.1:{port}/a2a: the real agent did " \
           "not answer: ConnectError" in done.stdout, done.stdout
    run = json.loads(next((tmp_path / "out").rglob("result.json")).read_text())
    started = [e["data"] for e in run["events"] if e["name"] == "remote_agent_started"]
    assert started[0]["forward"] == f"http://***@127.0.0.1:{port}/a2a", started
    _unsaid("hunter2-pw", done.stdout + done.stderr, tmp_path / "out")
    _unsaid("s3c", done.stdout + done.stderr, tmp_path / "out")


def test_a_listener_that_got_no_post_is_named_without_its_password(rest_agents: RunningAgents, tamesu: Callable,
                                                                   tmp_path: Path) -> None:
    # the turn that timed out waiting for the agent's post names the listener as the transport event does: before
    # b214d6df the line kept the public url's `hook:hunter2-pw@`
    port = _free_port()
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot:
    type: rest
    url: "{rest_agents.url}/bot"
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    response: {{ listen: {{ addr: "127.0.0.1:{port}", url: "http://hook:hunter2-pw@127.0.0.1:{port}/hook",
                          path: /hook, idle: 5s, done: $.end }} }}
    turn_timeout: 3s
tests:
  - {{ name: silent, target: bot, scenario: {{ script: [ {{ say: silent }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out", "--color", "never"], cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert f"waiting for a post to http://***@127.0.0.1:{port}/hook" in said, said
    _unsaid("hunter2-pw", said, tmp_path / "out")


def _ticker() -> Any:
    """A callback agent that answers "Working on: X", then posts a tick unasked every 0.3s for 6s: more after its
    answer than a turn may last."""

    async def bot(request: Request) -> Response:
        callback = str((await request.json())["callback"])

        async def post() -> None:
            async with httpx.AsyncClient(timeout=5) as client:
                await client.post(callback, json={"text": "Working on: it"})
                for n in range(20):
                    await asyncio.sleep(0.3)
                    await client.post(callback, json={"text": f"tick {n}"})

        return JSONResponse({"accepted": True}, background=BackgroundTask(post))

    return Starlette(routes=[Route("/bot", bot, methods=["POST"])])


def test_a_wait_for_whose_later_posts_outlast_the_turn_names_the_listener_without_its_password(
        tamesu: Callable, tmp_path: Path, serve: Any) -> None:
    # a wait_for hears the agent's first unasked post, and its posts go on past turn_timeout: the line names the
    # listener as the transport event does (`unasked`; before b214d6df it kept `hook:hunter2-pw@`)
    agent = serve(_ticker())
    port = _free_port()
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot:
    type: rest
    url: "{agent.url}/bot"
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    response: {{ listen: {{ addr: "127.0.0.1:{port}", url: "http://hook:hunter2-pw@127.0.0.1:{port}/hook",
                          path: /hook, idle: 2s, done: {{ path: $.text, equals: "Working on: it" }} }} }}
    turn_timeout: 2s
tests:
  - {{ name: ticking, target: bot, scenario: {{ script: [ {{ say: it }}, {{ wait_for: finished, timeout: 10s }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out", "--color", "never"], cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert f"turn timed out after 2s (waiting for a post to http://***@127.0.0.1:{port}/hook)" in said, said
    _unsaid("hunter2-pw", said, tmp_path / "out")
