"""`max_concurrent`: a model server that answers one request at a time (Ollama's default on a small machine,
llama.cpp's one slot) and many tests at once. Without a limit every request waits in the server's queue with
its timeout running; with one, the wait is tamesu's and no part of the timeout."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import OpenAIServer
from tamesu.models import queueing
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
TESTS = 6


class OneAtATime:
    """An ASGI wrapper that answers one request at a time, each taking `seconds`, and counts how many requests
    were at the server at once (answered or waiting)."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds
        self.lock: asyncio.Lock | None = None
        self.here = self.most = self.served = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            return await self.app(scope, receive, send)
        self.lock = self.lock or asyncio.Lock()
        self.here += 1
        self.most = max(self.most, self.here)
        try:
            async with self.lock:
                await asyncio.sleep(self.seconds)
                await self.app(scope, receive, send)
                self.served += 1
        finally:
            self.here -= 1


def test_max_concurrent_keeps_the_queue_out_of_the_timeout(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": "Your refund RF-889 was issued."})

    desk = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    judge = OpenAIServer()  # answers every judge with a passing verdict
    # 0.8 s an answer against a 3 s timeout: each call that waits in tamesu must still get its answer in time on a
    # loaded machine (0.4 s against 1.5 s left it 1.1 s), and six at once still pass it at the server
    slot = OneAtATime(judge.app, 0.8)
    url = judge.base_url(serve(slot).url)
    tests = "".join(f"  - {{ name: t{n}, target: desk, scenario: {{ script: [ {{ say: hi }} ] }}, "
                    "assert: [ { judge: The agent gives a reference } ] }\n" for n in range(TESTS))
    (tmp_path / "suite.tamesu.yaml").write_text(
        f'targets:\n  desk: {{ type: rest, url: "{desk}/chat" }}\ntests:\n{tests}')

    def run(limit: str) -> tuple[int, list[str]]:
        (tmp_path / "tamesu.yaml").write_text(
            "cache: { mode: off }\nmodels:\n"
            f"  judge: {{ provider: openai, model: test-model, base_url: '{url}', timeout: 3s, "
            f"max_retries: 0{limit} }}\n")
        result = tamesu(["run", "--out", "out", "--parallel", str(TESTS)], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
        newest = sorted((tmp_path / "out").iterdir())[-1]
        lines = [json.loads(x) for x in (newest / "results.jsonl").read_text().splitlines()]
        return result.returncode, sorted(line["status"] for line in lines)

    # six judges at once at a server of one slot, 0.8 s each: the fourth waits 3.2 s in its queue, past its 3 s
    code, statuses = run("")
    assert code == 3 and "error" in statuses and slot.most == TESTS
    deadline = time.monotonic() + 10
    while slot.here and time.monotonic() < deadline:  # the requests that timed out are still in its queue
        time.sleep(0.05)
    slot.most = 0
    code, statuses = run(", max_concurrent: 1")
    assert (code, statuses) == (0, ["passed"] * TESTS)
    assert slot.most == 1  # one request at the server at a time: the others waited in tamesu


PRICED = "price: { input_per_mtok: 1, output_per_mtok: 1 }"
"""Each judge call of `priced_judge` then costs $0.0011 (1,100 tokens at $1 per million)."""


def desk_app() -> Starlette:
    """The agent under test: gives a refund reference."""
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": "Your refund RF-889 was issued."})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def priced_judge() -> Starlette:
    """An OpenAI-shaped judge that passes every rubric, each answer 1,000 tokens in and 100 out."""
    async def completions(request: Request) -> JSONResponse:
        verdict = {"pass": True, "score": 1, "reason": "it gives one", "evidence": ["RF-889"]}
        return JSONResponse({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(verdict)}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}})

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def test_calls_waiting_for_their_turn_are_not_sent_once_the_budget_is_spent(tmp_path: Path, tamesu: Any,
                                                                            serve: Serve) -> None:
    # before: the budget was passed at the 3rd call, and the 4th, 5th and 6th, waiting for max_concurrent, were
    # sent all the same (2.4 times the budget spent), every error saying the spend of the 3rd
    desk = serve(desk_app()).url
    slot = OneAtATime(priced_judge(), 0.3)
    url = serve(slot).url + "/v1"
    tests = "".join(f"  - {{ name: t{n}, target: desk, scenario: {{ script: [ {{ say: hi }} ] }}, "
                    "assert: [ { judge: The agent gives a reference } ] }\n" for n in range(TESTS))
    (tmp_path / "suite.tamesu.yaml").write_text(
        f'targets:\n  desk: {{ type: rest, url: "{desk}/chat" }}\ntests:\n{tests}')
    # each call $0.0011 (1,100 tokens at $1 per million): the third passes $0.003
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { mode: off }\nbudget: { usd: 0.003 }\nmodels:\n"
        f"  judge: {{ provider: openai, model: m, base_url: '{url}', api_key: k, max_retries: 0, "
        f"max_concurrent: 1, {PRICED} }}\n")
    result = tamesu(["run", "--out", "out", "--parallel", str(TESTS)], cwd=tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert slot.served == 3, slot.served
    said = {line.strip() for line in result.stdout.splitlines() if "budget of $0.003 exceeded" in line}
    assert said and all(line.endswith("spent $0.0033") for line in said), said


def test_a_suites_own_budget_stops_that_suite_only(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: the strict suite, read first, passed its budget and every test of the other suite was skipped
    # ("not run: the budget was exceeded", $0 of the run's $1 spent); named to sort after it, they all ran
    desk = serve(desk_app()).url
    url = serve(priced_judge()).url + "/v1"
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { mode: off }\nbudget: { usd: 1 }\nsuites: ['*.tamesu.yaml']\nmodels:\n"
        f"  judge: {{ provider: openai, model: m, base_url: '{url}', api_key: k, max_retries: 0, "
        f"{PRICED} }}\n")
    tests = "".join(f"  - {{ name: t{n}, target: desk, scenario: {{ script: [ {{ say: hi }} ] }}, "
                    "assert: [ { judge: The agent gives a reference } ] }\n" for n in range(2))
    for name, budget in (("a_strict", "budget: { usd: 0.001 }\n"), ("other", "")):
        (tmp_path / f"{name}.tamesu.yaml").write_text(
            f'name: {name}\n{budget}targets:\n  desk: {{ type: rest, url: "{desk}/chat" }}\ntests:\n{tests}')
    result = tamesu(["run", "--out", "out", "--parallel", "1"], cwd=tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    rows = {json.loads(x)["id"]: json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()}
    assert {test: row["status"] for test, row in rows.items()} == {
        "a_strict/t0": "error", "a_strict/t1": "skipped", "other/t0": "passed", "other/t1": "passed"}, rows
    assert rows["a_strict/t1"]["skip_reason"] == "not run: the budget of suite a_strict was exceeded"
    # the run says why it exits 4 (before: nothing on the console's summary, run.json `stopped` null, no
    # ::error of --report github: an exit 4 over "2 passed, 0 failed, 1 error, 1 skipped")
    assert json.loads((run_dir / "run.json").read_text())["stopped"] == "the budget of suite a_strict was exceeded"
    assert "stopped early: the budget of suite a_strict was exceeded" in result.stdout, result.stdout


def test_a_model_targets_turn_does_not_count_its_wait_for_max_concurrent(tmp_path: Path, tamesu: Any,
                                                                         serve: Serve) -> None:
    # before: six model-target runs at once at a model of one place, 0.6 s each: the runs at the back of tamesu's
    # own queue waited past their 2 s turn_timeout and failed "turn timed out", the agent's fault, while the model
    # answered every request in 0.6 s. Here 1 s each against 4 s (six of them: 6 s), so that each answer has 3 s
    # to spare on a loaded machine (it had 1.4 s)
    bot = OpenAIServer()  # echoes the user, who says hello
    slot = OneAtATime(bot.app, 1.0)
    url = bot.base_url(serve(slot).url)
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { mode: off }\nmodels:\n"
        f"  bot: {{ provider: openai, model: test-model, base_url: '{url}', timeout: 5s, max_retries: 0, "
        "max_concurrent: 1 }\n")
    (tmp_path / "suite.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot, turn_timeout: 4s }\ntests:\n"
        f"  - {{ name: greets, target: bot, repeat: {TESTS}, scenario: {{ script: [ {{ say: hello }} ] }}, "
        "assert: [ { contains: hello } ] }\n")
    result = tamesu(["run", "--out", "out", "--parallel", str(TESTS)], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    assert slot.most == 1 and slot.served == TESTS
    [directory] = list((tmp_path / "out").iterdir())
    waits = [e["data"]["waited_s"] for run in directory.glob("suite/greets/run-*/result.json")
             for e in json.loads(run.read_text())["events"] if e["name"] == "model_queued"]
    # the runs behind the first waited their turn, and said so; the last about five answers' time
    assert len(waits) >= 3 and max(waits) >= 2.0, waits


def test_a_tests_timeout_does_not_count_its_wait_for_max_concurrent(tmp_path: Path, tamesu: Any,
                                                                    serve: Serve) -> None:
    # before: the test's own `timeout` (the whole conversation) counted tamesu's queue too: the runs at its back
    # failed "the test took longer than its timeout (2s)", the agent's fault, though each answer took 0.6 s (here 1 s
    # against 4 s, six of them 6 s: 3 s to spare for each on a loaded machine)
    bot = OpenAIServer()
    slot = OneAtATime(bot.app, 1.0)
    url = bot.base_url(serve(slot).url)
    (tmp_path / "tamesu.yaml").write_text(
        "cache: { mode: off }\nmodels:\n"
        f"  bot: {{ provider: openai, model: test-model, base_url: '{url}', timeout: 5s, max_retries: 0, "
        "max_concurrent: 1 }\n")
    (tmp_path / "suite.tamesu.yaml").write_text(
        "targets:\n  bot: { type: model, model: bot }\ntests:\n"
        f"  - {{ name: greets, target: bot, repeat: {TESTS}, timeout: 4s, "
        "scenario: { script: [ { say: hello } ] }, assert: [ { contains: hello } ] }\n")
    result = tamesu(["run", "--out", "out", "--parallel", str(TESTS)], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    assert slot.most == 1 and slot.served == TESTS


async def test_a_wait_for_a_place_once_the_deadline_passed_leaves_it_be() -> None:
    # before: a request waiting for its place while the deadline was already expiring (a clean-up after the
    # timeout, in a `finally`) tried to move it and raised RuntimeError ("Cannot change state of expiring
    # Timeout"), an internal error instead of the timeout
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05) as scope, queueing.clock(scope) as waits:
            try:
                await asyncio.sleep(5)
            finally:
                async with queueing.queued():
                    await asyncio.sleep(0)
    assert waits.waited < 1
