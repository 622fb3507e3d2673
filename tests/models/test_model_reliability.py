"""Model calls that are retried or time out say so (events, and counts in the run's metrics); a
`Retry-After: 0` is bounded; the replay cache keeps no secret and rejects an entry edited by hand; against
local OpenAI- and Anthropic-shaped servers through the real providers; `tamesu doctor` calls a model ready
only once it answered with a completion."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from model_servers import AnthropicServer, OpenAIServer, delay, raw, reasoned, status, text
from sdk_groups import IN_PROCESS_SDKS
from tamesu.models._retries import RETRY_FLOOR
from tamesu.models.base import Message, ModelError, ModelRequest
from tamesu.models.cache import CacheMiss, ReplayCache
from tamesu.models.client import ModelRegistry, check
from tamesu.models.ledger import Ledger
from tamesu.models.spec import ModelSpec
from tamesu.net.serve import ThreadServer
from tamesu.suite.secrets import Redactor

pytestmark = IN_PROCESS_SDKS  # every test but one calls an SDK in this process
Serve = Callable[[Any], ThreadServer]


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, **data: Any) -> None:
        self.seen.append((name, data))


def ask() -> ModelRequest:
    return ModelRequest(purpose="judge", messages=[Message(role="user", content="hello")])


@pytest.fixture
async def registry() -> Any:
    """ModelRegistry, each one made closed after the test: an unclosed one leaves its aiohttp session for the
    garbage collector, whose "Unclosed client session" warning lands in whichever test runs then."""
    made: list[ModelRegistry] = []

    def make(*args: Any, **options: Any) -> ModelRegistry:
        made.append(ModelRegistry(*args, **options))
        return made[-1]

    yield make
    for models in made:
        await models.aclose()


@pytest.fixture(params=[OpenAIServer, AnthropicServer], ids=["openai", "anthropic"])
def server(request: pytest.FixtureRequest, serve: Serve) -> tuple[Any, ModelSpec]:
    model_server = request.param()
    provider = "openai" if request.param is OpenAIServer else "anthropic"
    spec = ModelSpec(provider=provider, model="test-model", api_key="local",
                     base_url=model_server.base_url(serve(model_server.app).url), timeout=60, max_retries=3)
    return model_server, spec


async def test_retry_after_zero_is_never_a_burst(registry: Any, server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    model_server.plan(*(status(429, "slow down", retry_after="0") for _ in range(3)), text("at last"))
    sleeps, events, ledger = Sleeps(), Events(), Ledger()
    models = registry({"judge": spec}, sleep=sleeps, ledger=ledger).with_ledger(ledger.scope(), events)
    response = await models.client("judge").generate(ask())
    assert response.text == "at last"
    # the floor doubles: four calls take at least 0.25 + 0.5 + 1 s, never a few milliseconds
    floors = [RETRY_FLOOR, RETRY_FLOOR * 2, RETRY_FLOOR * 4]
    assert [f <= d <= f * 1.25 for d, f in zip(sleeps.delays, floors, strict=True)] == [True] * 3
    assert [(name, data["attempt"], data["wait_s"]) for name, data in events.seen] == [
        ("model_retry", n + 2, round(d, 3)) for n, d in enumerate(sleeps.delays)]
    assert "HTTP 429: slow down" in events.seen[0][1]["after"]
    assert events.seen[0][1]["model"] == f"{spec.provider}:test-model" and events.seen[0][1]["purpose"] == "judge"
    assert ledger.totals().retries == 3 and ledger.totals().timeouts == 0


async def test_retry_after_zero_really_waits(registry: Any, server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    model_server.plan(status(429, "slow down", retry_after="0"), text("ok"))
    models = registry({"judge": spec})
    await models.client("judge").generate(ask())
    await models.aclose()
    first, second = model_server.calls()
    assert second.at - first.at >= RETRY_FLOOR


async def test_a_server_trickling_its_answer_is_cut_saying_how_long_it_had(registry: Any, serve: Serve) -> None:
    # before: "no answer within 0.3s" after 5.3 s: the SDK's timeout is per read, tamesu's bound on the whole
    # answer 5 s more, and the message named the first alone
    import asyncio

    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def trickle(_: Any) -> StreamingResponse:
        async def spaces() -> Any:
            yield b"{"
            while True:
                await asyncio.sleep(0.02)  # far inside the 1 s per read, however loaded the machine
                yield b" "
        return StreamingResponse(spaces(), media_type="application/json")

    url = serve(Starlette(routes=[Route("/v1/chat/completions", trickle, methods=["POST"])])).url
    spec = ModelSpec(provider="openai", model="test-model", api_key="local", base_url=f"{url}/v1", timeout=1.0,
                     max_retries=0)
    with pytest.raises(ModelError) as caught:
        await registry({"judge": spec}, sleep=Sleeps()).client("judge").generate(ask())
    assert str(caught.value).startswith("openai:test-model: no whole answer within 6s (timeout 1s, each read "
                                        "within it, the whole answer 5s more)"), str(caught.value)
    assert caught.value.timed_out


async def test_timeouts_are_counted_and_recorded(registry: Any, server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    spec = spec.model_copy(update={"timeout": 0.3, "max_retries": 1})
    # held 30 s: a retry that came after a 1 s hold had ended was answered at once on a loaded machine
    model_server.plan(delay(30), delay(30))
    events, ledger = Events(), Ledger()
    models = registry({"judge": spec}, sleep=Sleeps(), ledger=ledger).with_ledger(ledger.scope(), events)
    with pytest.raises(ModelError, match=r"no answer within 0\.3s \(gave up after 2 attempts\)") as caught:
        await models.client("judge").generate(ask())
    assert caught.value.timed_out
    assert [(name, data["attempt"]) for name, data in events.seen] == [
        ("model_timeout", 1), ("model_retry", 2), ("model_timeout", 2)]
    assert events.seen[0][1]["retried"] is True and events.seen[2][1]["retried"] is False
    assert ledger.totals().retries == 1 and ledger.totals().timeouts == 2


# ---- the replay cache: no secrets, a checksum per entry ---------------------------------------------------


async def test_a_cache_entry_holds_no_secret_and_still_replays(registry: Any, server: tuple[Any, ModelSpec],
                                                              tmp_path: Path) -> None:
    model_server, spec = server
    secret = "sk-live-Zq9 /+x"
    redactor = Redactor()
    redactor.add(secret)
    model_server.plan(text(f"the user said {secret}"))
    cache = ReplayCache(tmp_path, mask=redactor.data)
    request = ModelRequest(purpose="simulator", messages=[Message(role="user", content=f"my key is {secret}")])
    recorded = await registry({"simulator": spec}, cache=cache).client("simulator").generate(request)
    assert recorded.text == f"the user said {secret}"  # the run itself saw the real answer
    [entry] = list(tmp_path.rglob("*.json"))
    stored = entry.read_text()
    assert secret not in stored and quote(secret) not in stored and "my key is ***" in stored
    assert json.loads(stored)["checksum"].startswith("sha256:")
    replayed = await registry({"simulator": spec}, cache=ReplayCache(tmp_path, "only")).client(
        "simulator").generate(request)
    assert replayed.cached and replayed.text == "the user said ***"
    assert len(model_server.calls()) == 1


async def test_a_hand_edited_cache_entry_is_a_miss_that_says_so(registry: Any, server: tuple[Any, ModelSpec],
                                                                tmp_path: Path) -> None:
    model_server, spec = server
    model_server.plan(text('{"pass": false, "reason": "no reference"}'), text('{"pass": false, "reason": "again"}'))
    await registry({"judge": spec}, cache=ReplayCache(tmp_path)).client("judge").generate(ask())
    [entry] = list(tmp_path.rglob("*.json"))
    entry.write_text(entry.read_text().replace('\\"pass\\": false', '\\"pass\\": true'))  # a verdict flipped
    assert '\\"pass\\": true' in entry.read_text()

    with pytest.raises(CacheMiss, match=r"does not match its checksum \(edited by hand\?\)"):
        await registry({"judge": spec}, cache=ReplayCache(tmp_path, "only")).client("judge").generate(ask())

    events = Events()
    models = registry({"judge": spec}, cache=ReplayCache(tmp_path)).with_ledger(Ledger(), events)
    answer = await models.client("judge").generate(ask())
    assert not answer.cached and answer.text == '{"pass": false, "reason": "again"}'  # asked the model again
    assert [name for name, _ in events.seen] == ["cache_entry_rejected"]
    assert events.seen[0][1]["reason"] == "does not match its checksum (edited by hand?)"
    assert len(model_server.calls()) == 2


# ---- tamesu doctor: ready only after a valid completion ------------------------------------------------


async def test_doctor_calls_a_model_ready_only_after_a_completion(server: tuple[Any, ModelSpec]) -> None:
    model_server, spec = server
    label = f"{spec.provider}:test-model"
    what = "chat completion" if spec.provider == "openai" else "Messages answer"
    model_server.plan(raw("<html>It works!</html>", "text/html"))
    # the server's words quoted as other lines quote them, in double quotes (a Python repr put single ones)
    assert await check(spec) == f'{label}: HTTP 200 but not a {what} (the body is text: "<html>It works!</html>")'
    model_server.plan(raw({"object": "list", "data": []}))
    needed = "choices" if spec.provider == "openai" else "content"
    assert await check(spec) == f'{label}: HTTP 200 but not a {what} (the JSON has no "{needed}")'
    model_server.plan(text(""))
    assert await check(spec) == f"{label}: answered with an empty completion"
    # a reasoning model spends the probe's 16 tokens thinking: it answered all the same
    model_server.plan(reasoned("", "The user asks me to say", stop="length"))
    assert await check(spec) is None
    model_server.plan(text("<think>The user asks me to"))
    assert await check(spec) is None
    model_server.plan(status(500, "model not loaded"))
    assert await check(spec) == f"{label}: HTTP 500: model not loaded"
    model_server.plan(text("ready"))
    assert await check(spec) is None
    completions = model_server.calls()
    assert len(completions) == 7 and "Reply with the single word: ready" in json.dumps(completions[-1].body)


async def test_a_refused_parameter_is_learnt_once_and_said(registry: Any, server: tuple[Any, ModelSpec]) -> None:
    # the refused call and the one made again were silent: a run's first calls cost twice, and nothing said why
    model_server, spec = server
    model_server.plan(status(400, "Unsupported value: 'temperature' does not support 0.2 with this model."),
                      text("first"), text("second"))
    events = Events()
    models = registry({"judge": spec}).with_ledger(Ledger(), events)
    request = ask().model_copy(update={"temperature": 0.2})
    answers = [await models.client("judge").generate(request) for _ in range(2)]
    assert [a.text for a in answers] == ["first", "second"]
    assert events.seen == [("model_adapted", {"model": f"{spec.provider}:test-model", "purpose": "judge",
                                              "change": "the server refused temperature: sent without it from now on"})]
    assert [("temperature" in json.dumps(c.body)) for c in model_server.calls()] == [True, False, False]


async def test_a_base_url_that_misses_the_apis_path_says_which_one_was_meant(server: tuple[Any, ModelSpec]) -> None:
    # Ollama's address alone (no /v1), or an Anthropic base_url with the /v1 its SDK adds itself: the server's
    # "Not Found" alone did not say that the path was wrong, nor which one was right
    model_server, spec = server
    right = spec.base_url or ""
    wrong = right.removesuffix("/v1") if spec.provider == "openai" else f"{right}/v1"
    asked = f"{wrong}/chat/completions" if spec.provider == "openai" else f"{wrong}/v1/messages"
    found = await check(spec.model_copy(update={"base_url": wrong}))
    assert found == f"{spec.provider}:test-model: HTTP 404: Not Found (POST {asked}: is base_url {right!r}?)"
    assert await check(spec) is None  # the base_url it named works
    # a 404 from the right path (a model the server does not have) is only the server's words
    model_server.plan(status(404, "model 'test-model' not found"))
    assert await check(spec) == f"{spec.provider}:test-model: HTTP 404: model 'test-model' not found"


def test_the_doctor_command_says_which_model_is_ready(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    good, broken = OpenAIServer(), OpenAIServer()
    broken.plan(raw("Welcome to nginx!", "text/html"))
    good_url, broken_url = (s.base_url(serve(s.app).url) for s in (good, broken))
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nmodels:\n"
        f"  judge: {{ provider: openai, model: good-model, base_url: '{good_url}', timeout: 60s }}\n"
        f"  simulator: {{ provider: openai, model: proxy, base_url: '{broken_url}', timeout: 60s }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{good_url}/models" }}
tests:
  - name: hello
    target: bot
    scenario: {{ script: [ {{ say: hi }} ] }}
""")
    result = tamesu(["doctor"], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert "models.judge (openai:good-model): ready" in result.stdout, result.stdout
    assert ("models.simulator (openai:proxy): openai:proxy: HTTP 200 but not a chat completion (the body is "
            'text: "Welcome to nginx!")') in result.stdout, result.stdout
    assert result.returncode != 0


def test_the_doctor_command_checks_fallbacks_and_the_models_a_target_names(tmp_path: Path, tamesu: Any,
                                                                          serve: Serve) -> None:
    # before: only the models under models: were asked; a fallback whose key was refused was first met when its
    # model failed, in the middle of a run (exit 3), and a model written on a target was never asked
    good, locked, claude = OpenAIServer(), OpenAIServer(require_key="sk-right"), AnthropicServer(require_key="sk-right")
    good_url, locked_url, claude_url = (s.base_url(serve(s.app).url) for s in (good, locked, claude))
    spare = f"{{ provider: openai, model: spare, base_url: '{locked_url}', api_key: '{{{{env.SPARE_KEY}}}}' }}"
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nmodels:\n"
        f"  target: {{ provider: openai, model: good-model, base_url: '{good_url}', fallback: {spare} }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot:
    type: model
    model: {{ provider: anthropic, model: claude-haiku-4-5, base_url: '{claude_url}', api_key: sk-right }}
    fallback: {spare}
tests:
  - {{ name: hello, target: bot, scenario: {{ script: [ {{ say: hi }} ] }} }}
""")
    result = tamesu(["doctor"], cwd=tmp_path, env={"OPENAI_API_KEY": "", "SPARE_KEY": "sk-wrong"})
    host = locked_url.removeprefix("http://").removesuffix("/v1")
    refused = f"openai:spare: the key was refused by {host} (HTTP 401)"
    lines = [line.split(None, 1) for line in result.stdout.splitlines() if "models." in line or "targets." in line]
    assert lines == [
        ["ok", "models.target (openai:good-model): ready"],
        ["FAIL", f"models.target.fallback (openai:spare): {refused}"],
        ["ok", "targets.bot.model (anthropic:claude-haiku-4-5): ready"],
        ["FAIL", f"targets.bot.fallback (openai:spare): {refused}"]], result.stdout
    assert "sk-wrong" not in result.stdout + result.stderr
    assert result.returncode != 0
    # the one spare model was asked once for both lines: one model list, no completion
    assert [r.path for r in locked.requests] == ["/v1/models"]
