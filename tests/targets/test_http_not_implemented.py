"""A server that answers HTTP 501 (Not Implemented) with a web page, as Python's `http.server` answers a POST: no
agent there takes the request, so where tamesu was sent is wrong (exit 3, one line naming the url and the status),
as for a 404 or 405, for the rest target (a send, a poll, a callback's send) and the a2a target alike."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agents.fixtures import RunningAgents, rest_agents

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[str]:
    """Python's own static file server on a free port of 127.0.0.1: it answers every POST 501 with an HTML page."""
    (tmp_path / "www").mkdir()

    class Quiet(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(tmp_path / "www"), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_501_web_page_is_where_tamesu_was_sent_not_the_agents_failure(
        tamesu: Callable, tmp_path: Path, file_server: str, rest_agents: RunningAgents) -> None:
    # before: "the agent answered HTTP 501 with a web page, titled 'Error response'" (rest) or the page's HTML
    # (a2a), the agent's failed turn: exit 1, fault agent
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  chat: {{ type: rest, url: "{file_server}/chat" }}
  bot:
    type: rest
    url: "{file_server}/bot"
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    response: {{ listen: {{ path: /hook, idle: 1s }} }}
    turn_timeout: 20s
  jobs:
    type: rest
    url: "{rest_agents.url}/jobs"
    response: {{ poll: {{ url: "{file_server}/status", method: POST, interval: 20ms }} }}
  a2a: {{ type: a2a, url: "{file_server}/a2a" }}
tests:
  - {{ name: chat, target: chat, scenario: {{ script: [ {{ say: hi }} ] }} }}
  - {{ name: bot, target: bot, scenario: {{ script: [ {{ say: hi }} ] }} }}
  - {{ name: jobs, target: jobs, scenario: {{ script: [ {{ say: hi }} ] }} }}
  - {{ name: a2a, target: a2a, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out", "--parallel", "2"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    runs = {(r := json.loads(p.read_text()))["test"]: r for p in (tmp_path / "out").rglob("result.json")}
    hint = ("does url name the agent's endpoint, and method its method? (a server that implements no such method "
            "there answers 501: Python's http.server, a static file server, to a POST)")
    page = "HTTP 501 (a web page, titled 'Error response')"
    assert {name: (run["status"], run["fault"]) for name, run in runs.items()} == {
        name: ("error", "environment") for name in ("chat", "bot", "jobs", "a2a")}, runs
    assert runs["chat"]["error"] == f"the agent's server refused the request at {file_server}/chat: {page}: {hint}"
    # a callback agent's send refused: the turn does not wait turn_timeout for posts that cannot come
    assert runs["bot"]["error"] == f"the agent's server refused the request at {file_server}/bot: {page}: {hint}"
    assert runs["jobs"]["error"] == f"the poll URL {file_server}/status refused the request: {page}: {hint}"
    assert runs["a2a"]["error"] == (f"a2a target a2a: the agent's server refused the request at {file_server}/a2a: "
                                    f"{page}: {hint}")


def test_a_password_written_in_a_rest_url_reaches_neither_the_error_line_nor_the_run_folder(
        tamesu: Callable, tmp_path: Path, file_server: str) -> None:
    # before: "the agent's server refused the request at http://shop:hunter2-pw@127.0.0.1:P/chat?key=k-0042: ..."
    # on the console and in result.json, and the transport event kept the password in result.json (a password
    # written in the url is a credential whether or not the suite declares it a secret)
    host = file_server.removeprefix("http://")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  chat: {{ type: rest, url: "http://shop:hunter2-pw@{host}/chat?key=k-0042" }}
tests:
  - {{ name: chat, target: chat, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    run = json.loads(next((tmp_path / "out").rglob("result.json")).read_text())
    assert run["error"].startswith(f"the agent's server refused the request at http://***@{host}/chat?...: "
                                   "HTTP 501"), run["error"]
    transport = [e["data"] for e in run["events"] if e["name"] == "transport"]
    assert transport and transport[0]["url"] == f"http://***@{host}/chat?key=k-0042", run["events"]
    for path in [*(tmp_path / "out").rglob("*")]:
        if path.is_file():
            assert "hunter2-pw" not in path.read_text(errors="replace"), path
    assert "hunter2-pw" not in result.stdout + result.stderr


def test_a_password_written_in_a_url_no_server_answers_is_never_said(tamesu: Callable, tmp_path: Path) -> None:
    # before: "rest target chat: cannot reach http://shop:hunter2-pw@127.0.0.1:P/chat after 1 attempt: ..." (and
    # the a2a target's card request alike) on the console and in every file of the run
    import socket
    with socket.socket() as sock:  # a port of this machine nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  chat: {{ type: rest, url: "http://shop:hunter2-pw@127.0.0.1:{port}/chat", connect: {{ attempts: 1 }} }}
  a2a: {{ type: a2a, url: "http://shop:hunter2-pw@127.0.0.1:{port}/a2a", connect: {{ attempts: 1 }} }}
tests:
  - {{ name: chat, target: chat, scenario: {{ script: [ {{ say: hi }} ] }} }}
  - {{ name: a2a, target: a2a, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    runs = {(r := json.loads(p.read_text()))["test"]: r for p in (tmp_path / "out").rglob("result.json")}
    assert runs["chat"]["error"].startswith(f"rest target chat: cannot reach http://***@127.0.0.1:{port}/chat "), runs
    assert f"cannot reach http://***@127.0.0.1:{port}/" in runs["a2a"]["error"], runs
    assert "hunter2-pw" not in result.stdout + result.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert "hunter2-pw" not in path.read_text(errors="replace"), path
