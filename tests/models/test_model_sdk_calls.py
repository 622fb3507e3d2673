"""Model calls go through the SDKs' documented methods, so the ecosystem's instrumentations see every one:
`tamesu run` of a persona suite in a child process (a fork of the warm process, tests/forked.py, which has
imported tamesu and the openai SDK before the instrumentation wraps it: a stricter order than a fresh
interpreter's) with OpenTelemetry's official instrumentation of the openai SDK
(`opentelemetry-instrumentation-openai-v2`) installed, and a span recorded for every call the local model server
answered. Retries, a wrong key and the replay cache still read as they did; and a model server that
answers 429 with Retry-After to many conversations at once gets their retries spread out, not in lockstep."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from conftest import why
from model_servers import AnthropicServer, OpenAIServer, status, text
from sdk_groups import IN_PROCESS_SDKS
from tamesu.models.base import Message, ModelRequest
from tamesu.models.client import ModelRegistry
from tamesu.models.spec import ModelSpec
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
KEY = "sk-run-0123456789abcdef"

# the CLI as `python -m tamesu` runs it, with the openai SDK instrumented; at exit, the spans it recorded
WRAPPER = """\
import atexit, json, os, runpy, sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
OpenAIInstrumentor().instrument(tracer_provider=provider)
def said():
    spans = [{"name": s.name, "attributes": dict(s.attributes or {})} for s in exporter.get_finished_spans()]
    with open(os.environ["SPANS_FILE"], "w") as out:
        json.dump(spans, out, default=str)
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


def run(tmp_path: Path, shape: str, base_url: str, agent_url: str, instrumented: bool = True
        ) -> tuple[int, str, list[dict[str, Any]], dict[str, Any]]:
    """`tamesu run` of one persona test, as a fork of the warm process (tests/forked.py; `instrumented`: through
    WRAPPER, which a fresh interpreter ran for 1.3 s of CPU); its exit code, output, the spans recorded (none
    unless `instrumented`) and its results line."""
    (tmp_path / "suite.yaml").write_text(
        f"models:\n  simulator: {{ provider: {shape}, model: test-model, base_url: '{base_url}', api_key: {KEY},"
        " timeout: 10s, max_retries: 2 }\n"
        f"targets:\n  desk: {{ type: rest, url: '{agent_url}/chat' }}\n"
        "tests:\n  - name: where\n    target: desk\n    persona: { name: Ada, style: brief }\n"
        "    scenario: { goal: 'Find out when the order ships', max_turns: 3 }\n"
        "    assert: [ { contains: Friday } ]\n", encoding="utf-8")
    spans = tmp_path / "spans.json"
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "SPANS_FILE": str(spans)}
    for name in ("TAMESU_DEBUG", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        env.pop(name, None)
    args = ["run", "suite.yaml", "--out", "out", "--no-cache"]
    if instrumented:
        (tmp_path / "wrapper.py").write_text(WRAPPER, encoding="utf-8")
    done = forked.run(args, tmp_path, env, 120, script=str(tmp_path / "wrapper.py") if instrumented else None)
    [line] = [json.loads(x) for found in (tmp_path / "out").glob("*/results.jsonl")
              for x in found.read_text().splitlines()]
    return done.returncode, done.stdout + done.stderr, json.loads(spans.read_text()) if instrumented else [], line


def started(serve: Serve, shape: str, **options: Any) -> tuple[OpenAIServer | AnthropicServer, str]:
    server = OpenAIServer(**options) if shape == "openai" else AnthropicServer(**options)
    return server, server.base_url(serve(server.app).url)


def test_the_openai_instrumentation_records_a_span_for_every_model_call(serve: Serve, tmp_path: Path,
                                                                         agent_url: str) -> None:
    server, base_url = started(serve, "openai")
    server.plan(status(429, "slow down", retry_after="0"), text(sim("When does my order ship?")),
                text(sim("Thanks", done=True)))
    code, output, spans, line = run(tmp_path, "openai", base_url, agent_url)
    assert code == 0, output + why(line)
    assert line["status"] == "passed"
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert len(server.calls()) == 3  # the 429, then two turns of the simulated user
    assert len(chats) == 3, spans  # the refused call too: the instrumentation saw it fail
    assert {s["attributes"].get("gen_ai.request.model") for s in chats} == {"test-model"}
    # the answered calls' usage, as the server counted it
    assert sum(int(s["attributes"].get("gen_ai.usage.input_tokens", 0)) for s in chats) > 0


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_wrong_key_reads_as_before(serve: Serve, tmp_path: Path, agent_url: str, shape: str) -> None:
    server, base_url = started(serve, shape, require_key="sk-the-right-one")
    # the openai SDK's error as its instrumentation passes it on; anthropic's has none (a fork: 3.4 s less CPU)
    code, output, _, line = run(tmp_path, shape, base_url, agent_url, instrumented=shape == "openai")
    assert code == 3, output
    error = line["runs"][0]["error"]
    assert f"{shape}:test-model: HTTP 401: Incorrect API key provided: ***. Find your key in your account." \
        in error, error
    assert KEY not in output and KEY not in json.dumps(line)
    assert len(server.calls()) == 1  # a 401 is not retried


@IN_PROCESS_SDKS  # the only test here that calls the openai SDK in this process
async def test_a_429_to_many_conversations_spreads_their_retries(serve: Serve) -> None:
    server, base_url = started(serve, "openai")
    many = 20
    server.plan(*(status(429, "slow down", retry_after="1") for _ in range(many)))
    spec = ModelSpec(provider="openai", model="test-model", base_url=base_url, api_key=KEY, max_retries=2)
    waited: list[float] = []

    async def sleep(seconds: float) -> None:  # the registry's own sleep, recorded
        waited.append(seconds)
        await asyncio.sleep(seconds)

    models = ModelRegistry({"simulator": spec}, sleep=sleep)
    def ask(n: int) -> ModelRequest:
        return ModelRequest(purpose="simulator", messages=[Message(role="user", content=f"conversation {n}")])

    try:
        answers = await asyncio.gather(*(models.client("simulator").generate(ask(n)) for n in range(many)))
    finally:
        await models.aclose()
    assert len(answers) == many
    sent: dict[str, list[float]] = {}
    for call in server.calls():
        sent.setdefault(call.body["messages"][-1]["content"], []).append(call.at)
    waits = sorted(times[1] - times[0] for times in sent.values())
    assert len(waits) == many
    # none before the server's Retry-After
    assert waits[0] >= 0.95, waits
    # each conversation waited its own time: Retry-After at least, spread over a quarter more
    assert len(waited) == many and all(1.0 <= w <= 1.25 for w in waited), waited
    assert max(waited) - min(waited) > 0.1 and len(set(waited)) == many, waited
