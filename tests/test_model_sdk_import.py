"""A run against a model whose base URL is known never imports the provider's SDK unless a call fails (the
`anthropic` import alone is 72 MB of memory, `openai` 43 MB): `tamesu run` of a persona suite in a child process
against the local model servers, and what `sys.modules` holds when it exits. A failing server (429 then 200, a
401) still reads as it always did: the SDK is imported then, to make the error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import why
from model_servers import AnthropicServer, OpenAIServer, status, text
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
KEY = "sk-run-0123456789abcdef"

# the CLI as `python -m tamesu` runs it, and at exit, which of the SDKs were ever imported
WRAPPER = """\
import atexit, json, os, runpy, sys
def said():
    with open(os.environ["SDKS_FILE"], "w") as out:
        json.dump(sorted(name for name in ("openai", "anthropic") if name in sys.modules), out)
atexit.register(said)
sys.argv[0] = "tamesu"
runpy.run_module("tamesu", run_name="__main__", alter_sys=True)
"""


async def _desk(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"Your order ships Friday (you said: {(await request.json())['message']})"})


@pytest.fixture(scope="module")
def agent_url() -> Any:
    server = ThreadServer(Starlette(routes=[Route("/chat", _desk, methods=["POST"])])).start()
    yield server.url
    server.stop()


def sim(words: str, done: bool = False) -> str:
    return json.dumps({"input": words, "goal_achieved": done, "stop": False, "reasoning": "playing Ada"})


def run(tmp_path: Path, shape: str, base_url: str, agent_url: str) -> tuple[int, str, list[str], dict[str, Any]]:
    """`tamesu run` of one persona test; its exit code, output, the SDKs it imported and its results line."""
    (tmp_path / "suite.yaml").write_text(
        f"models:\n  simulator: {{ provider: {shape}, model: test-model, base_url: '{base_url}', api_key: {KEY},"
        " timeout: 10s, max_retries: 2 }\n"
        f"targets:\n  desk: {{ type: rest, url: '{agent_url}/chat' }}\n"
        "tests:\n  - name: where\n    target: desk\n    persona: { name: Ada, style: brief }\n"
        "    scenario: { goal: 'Find out when the order ships', max_turns: 3 }\n"
        "    assert: [ { contains: Friday } ]\n", encoding="utf-8")
    sdks = tmp_path / "sdks.json"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "SDKS_FILE": str(sdks)}
    for name in ("TAMESU_DEBUG", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_CUSTOM_HEADERS",
                 "ANTHROPIC_CUSTOM_HEADERS"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", WRAPPER, "run", "suite.yaml", "--out", "out", "--no-cache"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    [line] = [json.loads(x) for found in (tmp_path / "out").glob("*/results.jsonl")
              for x in found.read_text().splitlines()]
    return done.returncode, done.stdout + done.stderr, json.loads(sdks.read_text()), line


def started(serve: Serve, shape: str, **options: Any) -> tuple[OpenAIServer | AnthropicServer, str]:
    server = OpenAIServer(**options) if shape == "openai" else AnthropicServer(**options)
    return server, server.base_url(serve(server.app).url)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_persona_run_never_imports_the_sdk(serve: Serve, tmp_path: Path, agent_url: str, shape: str) -> None:
    server, base_url = started(serve, shape)
    server.plan(text(sim("When does my order ship?")), text(sim("Thanks", done=True)))
    code, output, sdks, line = run(tmp_path, shape, base_url, agent_url)
    assert code == 0, output + why(line)
    assert line["status"] == "passed"
    assert len(server.calls()) == 2
    assert sdks == []


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_rate_limit_then_an_answer_is_retried_as_before(serve: Serve, tmp_path: Path, agent_url: str,
                                                          shape: str) -> None:
    server, base_url = started(serve, shape)
    server.plan(status(429, "slow down", retry_after="0"), text(sim("When does my order ship?")),
                text(sim("Thanks", done=True)))
    code, output, sdks, line = run(tmp_path, shape, base_url, agent_url)
    assert code == 0, output + why(line)
    detail = json.loads(next((tmp_path / "out").glob("*/*/*/run-*/result.json")).read_text())
    [retry] = [e["data"] for e in detail["events"] if e["name"] == "model_retry"]
    assert f"{shape}:test-model: HTTP 429: slow down" in json.dumps(retry)
    assert detail["metrics"]["llm_retries"] == 1 and len(server.calls()) == 3
    assert sdks == [shape]  # imported to make the 429's error, and only then


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_wrong_key_reads_as_before(serve: Serve, tmp_path: Path, agent_url: str, shape: str) -> None:
    server, base_url = started(serve, shape, require_key="sk-the-right-one")
    code, output, sdks, line = run(tmp_path, shape, base_url, agent_url)
    assert code == 3, output
    assert line["status"] == "error"
    error = line["runs"][0]["error"]
    assert f"{shape}:test-model: HTTP 401: Incorrect API key provided: ***. Find your key in your account." \
        in error, error
    assert KEY not in output and KEY not in json.dumps(line)
    assert len(server.calls()) == 1  # a 401 is not retried
    assert sdks == [shape]
