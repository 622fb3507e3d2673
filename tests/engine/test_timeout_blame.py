"""A test's `timeout` that runs out while tamesu's own model (the simulated user) is still answering is the
environment's error, not a failure of the agent; one that runs out while the agent answers stays the agent's."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import OpenAIServer, delay, status
from tamesu.net.serve import ThreadServer


def _rows(folder: Path) -> dict[str, dict[str, Any]]:
    [run_dir] = [d for d in folder.iterdir() if d.is_dir()]
    return {json.loads(x)["id"]: json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()}


def test_a_timeout_during_the_simulators_answer_is_no_failure_of_the_agent(
        tmp_path: Path, tamesu: Any, serve: Callable[[Any], ThreadServer]) -> None:
    # before: "FAIL ... the test took longer than its timeout (1s)", fault: agent, exit 1, while the agent had not
    # been spoken to: the simulated user's model was still answering
    spoken = 0

    async def chat(request: Request) -> JSONResponse:
        nonlocal spoken
        spoken += 1
        body = await request.json()
        if body.get("message") == "slow":
            await asyncio.sleep(3)
        return JSONResponse({"text": "hello"})

    agent = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    model = OpenAIServer()
    model.plan(delay(3))  # the simulator's first answer comes after the test's timeout
    url = model.base_url(serve(model.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { mode: off }\nmodels:\n"
        f"  simulator: {{ provider: openai, model: m, base_url: '{url}', api_key: k, max_retries: 0 }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
name: s
targets:
  bot: {{ type: rest, url: '{agent}/chat' }}
tests:
  - {{ name: simulated, target: bot, timeout: 1s, scenario: {{ goal: get help, max_turns: 2 }} }}
  - {{ name: scripted, target: bot, timeout: 1s, scenario: {{ script: [ {{ say: slow }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out", "--parallel", "1", "--color", "never"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    rows = _rows(tmp_path / "out")
    [simulated] = rows["s/simulated"]["runs"]
    assert rows["s/simulated"]["status"] == "error" and simulated["fault"] == "environment", simulated
    assert simulated["error"] == ("the test's timeout (1s) ran out during the simulator's call to openai:m, not "
                                  "while the agent answered"), simulated
    # the agent's own slowness is still its failure
    [scripted] = rows["s/scripted"]["runs"]
    assert rows["s/scripted"]["status"] == "failed" and scripted["fault"] == "agent", scripted
    assert [f["reason"] for f in scripted["failures"]] == ["the test took longer than its timeout (1s)"]
    assert spoken == 1  # the scripted test's turn alone: the simulated one never reached the agent


def test_a_timeout_while_the_model_client_waits_to_retry_names_the_model_and_is_no_failure_of_the_agent(
        tmp_path: Path, tamesu: Any, serve: Callable[[Any], ThreadServer]) -> None:
    # before: "FAIL ... the test took longer than its timeout (1s)" (fault: agent, exit 1) for the simulator, and
    # "turn timed out after 1s" for a model target, while the model client slept on the server's Retry-After
    spoken = 0

    async def chat(request: Request) -> JSONResponse:
        nonlocal spoken
        spoken += 1
        return JSONResponse({"text": "hello"})

    agent = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    simulator, target = OpenAIServer(), OpenAIServer()
    simulator.plan(status(429, "slow down", retry_after="20"))
    target.plan(status(503, "overloaded", retry_after="20"))
    simulator_url = simulator.base_url(serve(simulator.app).url)
    target_url = target.base_url(serve(target.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { mode: off }\nmodels:\n"
        f"  simulator: {{ provider: openai, model: sim, base_url: '{simulator_url}', api_key: k, max_retries: 2 }}\n"
        f"  target: {{ provider: openai, model: tm, base_url: '{target_url}', api_key: k, max_retries: 3 }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
name: s
targets:
  bot: {{ type: rest, url: '{agent}/chat' }}
  llm: {{ type: model, turn_timeout: 1s }}
tests:
  - {{ name: simulated, target: bot, timeout: 1s, scenario: {{ goal: get help, max_turns: 2 }} }}
  - {{ name: model, target: llm, timeout: 30s, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--out", "out", "--parallel", "1", "--color", "never"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    rows = _rows(tmp_path / "out")
    [simulated] = rows["s/simulated"]["runs"]
    assert rows["s/simulated"]["status"] == "error" and simulated["fault"] == "environment", simulated
    assert re.fullmatch(
        r"the test's timeout \(1s\) ran out during the simulator's call to openai:sim, waiting [\d.]+s to retry "
        r"after HTTP 429 \(1 of 3 attempts made\), not while the agent answered", simulated["error"]), simulated
    [model] = rows["s/model"]["runs"]
    assert rows["s/model"]["status"] == "error" and model["fault"] == "environment", model
    assert re.fullmatch(
        r"model target llm: turn_timeout \(1s\) ran out during the target's call to openai:tm, waiting [\d.]+s to "
        r"retry after HTTP 503 \(1 of 4 attempts made\), not while the model answered", model["error"]), model
    assert spoken == 0 and len(simulator.calls()) == 1 and len(target.calls()) == 1
