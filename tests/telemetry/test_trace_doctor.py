"""`tamesu doctor` checks `traces:` as a run would meet it: a `receive` address it can listen on, a `query`
backend that answers and takes its credentials (never printed). Before, doctor said nothing of either, and the
run found them: a receiver port taken, a backend refusing its token, exit 3 on the first suite."""

from __future__ import annotations

import socket
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from agents.traced import free_port
from ports import refused_port

TOKEN = "tok-Q7v2-doctor"


def _project(tmp_path: Path, traces: str) -> None:
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {traces}\n")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  shop: { type: rest, url: 'http://127.0.0.1:9/chat', request: { body: { message: '{{message}}' } } }
tests:
  - name: order
    target: shop
    scenario: { script: [ { say: 'hi' } ] }
""")


def _traces_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "traces." in line]


def test_doctor_says_whether_the_receivers_port_can_be_listened_on(tmp_path: Path, tamesu) -> None:
    port = free_port()
    _project(tmp_path, f"{{ receive: '127.0.0.1:{port}' }}")
    done = tamesu(["doctor"], cwd=tmp_path)
    assert _traces_lines(done.stdout) == [
        f"ok    traces.receive: 127.0.0.1:{port} can be listened on (OTLP/HTTP, for the agent's spans)"], done.stdout
    with socket.create_server(("127.0.0.1", port)):  # another process's collector on it
        done = tamesu(["doctor"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = _traces_lines(done.stdout)
    assert len(lines) == 1 and lines[0].startswith(f"FAIL  traces.receive: cannot listen on 127.0.0.1:{port}: "), \
        done.stdout
    # `{{env.NAME}}` filled in as the run fills it; unset: the run's one line
    _project(tmp_path, "{ receive: '127.0.0.1:{{env.OTLP_PORT}}' }")
    done = tamesu(["doctor"], cwd=tmp_path, env={"OTLP_PORT": str(port)})
    assert _traces_lines(done.stdout) == [
        f"ok    traces.receive: 127.0.0.1:{port} can be listened on (OTLP/HTTP, for the agent's spans)"], done.stdout


def _backend() -> Starlette:
    """A Tempo that wants `authorization: Bearer TOKEN` and has no trace."""

    async def trace(request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return PlainTextResponse("unauthorized", status_code=401)
        return JSONResponse({"error": "trace not found"}, status_code=404)

    return Starlette(routes=[Route("/api/traces/{trace_id}", trace)])


def test_doctor_asks_the_query_backend_with_its_credentials_and_never_shows_them(tmp_path: Path, tamesu,
                                                                                 serve) -> None:
    base = serve(_backend()).url
    _project(tmp_path, f"{{ query: {{ tempo: '{base}', headers: {{ authorization: 'Bearer {{{{secrets.TEMPO_TOKEN}}}}' "
                       "} } }")
    done = tamesu(["doctor"], cwd=tmp_path, env={"TEMPO_TOKEN": TOKEN})
    assert _traces_lines(done.stdout) == [f"ok    traces.query: tempo at {base} answers, its credentials accepted"], \
        done.stdout
    wrong = "tok-wrong-8Hk1"
    done = tamesu(["doctor"], cwd=tmp_path, env={"TEMPO_TOKEN": wrong})
    assert done.returncode == 3, done.stdout + done.stderr
    assert _traces_lines(done.stdout) == [
        f"FAIL  traces.query: tempo at {base} answered 401 for {base}/api/traces/{'0' * 31}1: unauthorized (check "
        "traces.query's credentials: its headers, or a user:password@ in its URL)"], done.stdout
    assert wrong not in done.stdout + done.stderr and TOKEN not in done.stdout + done.stderr
    # a password in the URL: sent, never shown
    with_password = base.replace("http://", f"http://reader:{TOKEN}@")
    _project(tmp_path, f"{{ query: {{ jaeger: '{with_password}' }} }}")
    done = tamesu(["doctor"], cwd=tmp_path)
    lines = _traces_lines(done.stdout)
    assert len(lines) == 1 and lines[0].startswith("FAIL  traces.query: jaeger at http://***@127.0.0.1:"), done.stdout
    assert TOKEN not in done.stdout + done.stderr
    # nothing there
    _project(tmp_path, f"{{ query: {{ jaeger: 'http://127.0.0.1:{refused_port()}' }} }}")
    done = tamesu(["doctor"], cwd=tmp_path)
    lines = _traces_lines(done.stdout)
    assert len(lines) == 1 and lines[0].startswith("FAIL  traces.query: jaeger at http://127.0.0.1:") and \
        "cannot be reached" in lines[0], done.stdout
