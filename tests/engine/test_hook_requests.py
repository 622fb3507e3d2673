"""Hooks' `http:` requests against a real local backend, as a user writes them in a suite."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from conftest import run_tamesu

SLOW_SECONDS = 20.0

_SUITE = """
hooks:
  before_all:
{hooks}
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
tests:
  - {{ name: t, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: hello }} ] }}
"""


async def _slow(request: Request) -> Response:
    # answers after SLOW_SECONDS, or stops as soon as the caller gives up (so the server stops at once)
    deadline = time.monotonic() + SLOW_SECONDS
    while time.monotonic() < deadline and not await request.is_disconnected():
        await asyncio.sleep(0.05)
    return PlainTextResponse("late")


async def _locked(request: Request) -> Response:
    token = request.headers.get("x-api-key")
    return JSONResponse({"error": "the database is locked", **({"key": token} if token else {})}, status_code=409)


async def _moved(request: Request) -> Response:
    return RedirectResponse("/seed/", status_code=307)  # as FastAPI answers a path written without its slash


async def _endless(request: Request) -> Response:
    async def chunks():  # a backend that never stops answering (bounded here, past what a hook reads)
        for _ in range(40):
            if await request.is_disconnected():
                return
            yield b"x" * 1_000_000

    return StreamingResponse(chunks(), media_type="text/plain")


_TRACE = "Traceback (most recent call last):\n" + '  File "app.py", line 12, in seed\n' * 30


async def _crashed(_request: Request) -> Response:
    return PlainTextResponse(_TRACE, status_code=500)


def _backend(serve: Callable[[Any], Any]) -> str:
    return str(serve(Starlette(routes=[Route("/slow", _slow), Route("/seed", _locked, methods=["POST"]),
                                       Route("/crashed", _crashed, methods=["POST"]),
                                       Route("/moved", _moved, methods=["POST"]), Route("/endless", _endless)])).url)


def _run(tmp_path: Path, hooks: str) -> tuple[int, str]:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(hooks=hooks))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"SEED_KEY": "s3cret-key"})
    return done.returncode, done.stdout + done.stderr


def test_a_timeout_beside_http_bounds_the_request(tmp_path: Path, serve: Callable[[Any], Any]) -> None:
    # before: the hook's `timeout:` (docs/concepts.md: hooks are commands or requests "with timeout") bounded only
    # a command; an http hook waited the request's default 30 s, and here passed when the answer came after 20 s
    url = _backend(serve)
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/slow" }}, timeout: 1s }}\n')
    assert code == 3, said
    assert f"before_all hook 1: GET {url}/slow" in said and "within 1s" in said, said
    # the request's own timeout, written, still holds when it is the smaller
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/slow", timeout: 1s }}, timeout: 5s }}\n')
    assert code == 3 and "within 1s" in said, said


def test_a_request_no_server_could_take_is_a_suite_error_where_written(tmp_path: Path) -> None:
    # before: validate said ok and each run was an error (exit 3): 'Method cannot contain non-token characters',
    # 'the URL's scheme 'ftp' is not http(s)'; an env: beside http: was taken and sent nowhere
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(hooks=(
        '    - { http: { url: "http://127.0.0.1:9/seed", method: "GE T" } }\n'
        '    - { http: { url: "ftp://127.0.0.1:9/seed" } }\n'
        '    - { http: { url: "/seed" } }\n'
        '    - { http: { url: "http://127.0.0.1:9/seed" }, env: { TOKEN: x } }\n'
        '    - { http: { url: "{{env.HOME}}/seed" } }\n'
        '    - { run: "true", env: { TOKEN: x } }\n')))
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "s.tamesu.yaml:4:57: hooks.before_all[0].http.method: expected an HTTP method such as GET or POST, " \
           "got 'GE T'" in said, said
    assert "s.tamesu.yaml:5:22: hooks.before_all[1].http.url: expected an http:// or https:// URL, got " \
           "'ftp://127.0.0.1:9/seed'" in said, said
    assert "hooks.before_all[2].http.url: expected an http:// or https:// URL, got '/seed'" in said, said
    assert "hooks.before_all[3].env: env is a command's environment: an http: hook sends none" in said, said
    assert said.count("s.tamesu.yaml:") == 4, said  # a template's URL and a command's env are fine


def test_every_problem_of_a_hook_is_said_at_once(tmp_path: Path) -> None:
    # before: a hook's env beside an http: whose url was wrong, and a hook of both kinds (or none) with another
    # problem, were said only once the url (the other problem) was fixed: one problem a validate
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(hooks=(
        '    - { http: { url: "ftp://x" }, env: { TOKEN: x } }\n'
        '    - { run: "true", http: { url: "ftp://x" } }\n'
        '    - { timeout: forever }\n'
        '    - { http: null, run: "true", env: { TOKEN: x } }\n')))
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "s.tamesu.yaml:4:22: hooks.before_all[0].http.url: expected an http:// or https:// URL" in said, said
    assert "s.tamesu.yaml:4:40: hooks.before_all[0].env: env is a command's environment: an http: hook sends " \
           "none" in said, said
    assert "s.tamesu.yaml:5:7: hooks.before_all[1]: a hook is either run: <command> or http: {url, ...}" in said
    assert "s.tamesu.yaml:5:35: hooks.before_all[1].http.url: expected an http:// or https:// URL" in said, said
    assert "s.tamesu.yaml:6:7: hooks.before_all[2]: a hook is either run: <command> or http: {url, ...}" in said
    assert "s.tamesu.yaml:6:18: hooks.before_all[2].timeout: expected a duration" in said, said
    assert said.count("s.tamesu.yaml:") == 6, said  # an http: written null is none: a command's env is fine



def test_a_refused_request_says_what_the_backend_answered(tmp_path: Path, serve: Callable[[Any], Any]) -> None:
    # before: 'POST URL answered 409, expected a 2xx status', and not a word of the backend's why
    url = _backend(serve)
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/seed", method: POST, body: {{ n: 1 }} }} }}\n')
    assert code == 3, said
    assert f'POST {url}/seed answered 409, expected a 2xx status: {{"error":"the database is locked"}}' in said, said
    # a backend's stack trace: its lines on one line, cut at a word's end with … (was: cut mid-word at 400)
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/crashed", method: POST }} }}\n')
    assert code == 3, said
    words = said.split(f"POST {url}/crashed answered 500, expected a 2xx status: ", 1)[1].split("\n", 1)[0]
    assert words.startswith('Traceback (most recent call last): File "app.py", line 12, in seed File "app.py"'), words
    assert words.endswith(', line 12, in seed File…') and len(words) <= 400, words
    # a backend that quotes the key it was sent: masked, on the console and in every record
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/seed", method: POST, '
                                'headers: { X-Api-Key: "{{secrets.SEED_KEY}}" } } }\n')
    assert code == 3 and '"key":"***"' in said, said
    assert not [f for f in (tmp_path / "out").rglob("*") if f.is_file() and b"s3cret-key" in f.read_bytes()]


def test_a_redirect_not_followed_says_where_to(tmp_path: Path, serve: Callable[[Any], Any]) -> None:
    # before: 'POST URL/moved answered 307, expected a 2xx status', and not where the backend sent it
    url = _backend(serve)
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/moved", method: POST }} }}\n')
    assert code == 3, said
    assert (f"POST {url}/moved answered 307, expected a 2xx status (redirected to {url}/seed/, which is not "
            "followed: write that URL)") in said, said


def test_a_url_a_template_makes_that_is_none_is_the_hooks_failure(tmp_path: Path) -> None:
    # before: 'tamesu: internal error: InvalidURL: Invalid port: ':1'', the run ended with no result
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(hooks='    - { http: { url: "{{env.SEED_BASE}}/seed" } }\n'))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"SEED_BASE": "http://[::1"})
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert "before_all hook 1: GET http://[::1/seed: not a URL that can be sent to (Invalid port: ':1')" in said, said
    assert "internal error" not in said


def test_an_answer_past_what_a_hook_reads_is_its_failure(tmp_path: Path, serve: Callable[[Any], Any]) -> None:
    # before: read whole into memory however large (40 MB here; an endless stream until the timeout)
    url = _backend(serve)
    code, said = _run(tmp_path, f'    - {{ http: {{ url: "{url}/endless" }} }}\n')
    assert code == 3, said
    assert f"GET {url}/endless: the answer is larger than 16,000,000 bytes, more than a hook reads" in said, said
