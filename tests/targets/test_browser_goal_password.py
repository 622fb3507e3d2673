"""A browser target whose url holds a `user:password@`: the browser agent and the judge see the page's url without
it (every other record of the url already hid it, 935fff5e), so it is in no model request, replay cache entry,
transcript or call record; and a url the agent answers with on the page's origin, copied with its `***@` or
written without any userinfo, is opened with the credentials the user wrote (for that origin only)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from browser_fixtures import shared_chromium
from conftest import run_tamesu
from model_servers import OpenAIServer, text, tool_call

FIXTURES = (shared_chromium,)
"""Session fixtures of browser_fixtures, used by name below."""

PASSWORD = "hunter2-Qv7"
PAGES = {"/": "Home", "/next": "Next", "/last": "Last"}


class _Server(ThreadingHTTPServer):
    seen: list[tuple[str, str]]
    """(path, Authorization header) of every request, in order."""


class _BasicAuth(BaseHTTPRequestHandler):
    """Pages only behind basic auth (shop:PASSWORD), as a staging site is: without them a 401."""

    server: _Server

    def do_GET(self) -> None:
        header = self.headers.get("Authorization", "")
        self.server.seen.append((self.path, header))
        wanted = "Basic " + base64.b64encode(f"shop:{PASSWORD}".encode()).decode()
        title = PAGES.get(self.path)
        if header != wanted or title is None:
            self.send_response(401 if header != wanted else 404)
            self.send_header("WWW-Authenticate", 'Basic realm="staging"')
            body = b"<h1>No</h1>"
        else:
            self.send_response(200)
            body = f"<title>{title}</title><h1>{title}</h1>".encode()
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def staging() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _BasicAuth)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_agent_sees_no_password_and_its_urls_on_the_origin_open_with_it(
        tmp_path: Path, staging: _Server, shared_chromium: str, serve: Any) -> None:
    # before: the observation's url was http://shop:hunter2-Qv7@127.0.0.1:P/ in the model request and so in its
    # replay cache entry; the agent's ***@ copy of it opened as user '***' (a 401, then chrome-error://)
    address = f"127.0.0.1:{staging.server_address[1]}"
    model = OpenAIServer()
    server = serve(model.app)
    verdict = {"pass": True, "reason": "the last page", "evidence": ["Last"]}
    # the agent copies the url it sees (with its ***@), then writes one without userinfo, as models do
    model.plan(tool_call("navigate", {"url": f"http://***@{address}/next"}),
               tool_call("navigate", {"url": f"http://{address}/last"}),
               tool_call("done", {"summary": "at the last page"}),
               text(json.dumps(verdict)))
    base_url = OpenAIServer.base_url(server.url)
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { dir: .tamesu/cache }\n"
        "models:\n"
        f"  browser: {{ provider: openai, model: m, base_url: '{base_url}', api_key: k, timeout: 5s }}\n"
        f"  judge: {{ provider: openai, model: m, base_url: '{base_url}', api_key: k, timeout: 5s }}\n")
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  staging: {{ type: browser, url: "http://shop:{PASSWORD}@{address}/", load_timeout: 20s }}
tests:
  - name: walk
    target: staging
    steps:
      - {{ goal: Walk to the last page, max_steps: 4 }}
      - expect: the last page
      - {{ action: navigate, url: "http://shop:{PASSWORD}@{address}/" }}
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, timeout=180,
                      env={"TAMESU_BROWSER_CDP_URL": shared_chromium})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    wanted = "Basic " + base64.b64encode(f"shop:{PASSWORD}".encode()).decode()
    # Chromium asks without credentials first, and sends them on the 401's challenge
    assert [path for path, header in staging.seen if header == wanted] == ["/", "/next", "/last", "/"], staging.seen
    sent = json.dumps([c.body for c in model.calls()])
    assert len(model.calls()) == 4
    assert PASSWORD not in sent, sent[sent.index(PASSWORD) - 200:sent.index(PASSWORD) + 50]
    assert f"url: http://***@{address}/last" in sent  # the judge's context: the url, its userinfo hidden
    cache = tmp_path / ".tamesu" / "cache"
    assert any(p.is_file() for p in cache.rglob("*")), "the model calls were not cached"
    assert PASSWORD not in said
    for folder in (tmp_path / "out", cache):
        for path in folder.rglob("*"):
            if path.is_file():
                assert PASSWORD.encode() not in path.read_bytes(), path
