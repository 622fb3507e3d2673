"""The model target against a scripted model: history, tool rounds, templates, failures and fallback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sessions import new_session
from tamesu.conversation import Session, TurnError, UserTurn
from tamesu.errors import InfraError
from tamesu.models.base import ModelError, ModelRequest, ModelResponse, ToolRequest
from tamesu.models.spec import ModelSpec
from tamesu.suite.templates import Context
from tamesu.targets import target_class
from tamesu.targets.model import ModelTarget, ModelTargetSpec

# -- a scripted model and a Models stand-in ----------------------------------------------------------------

Calls = list[tuple[str, dict[str, Any]]]


class ScriptedModel:
    """A model that follows explicit rules, and keeps every request it was sent.

    - After tool results (the last message is a tool message): it says "tools said: " and the tool
      messages' contents joined by " | "; unless `insist` is set, then it asks for the same tools again.
    - Otherwise, the first rule whose key appears in the last user message answers: a string is said,
      a list of (tool name, args) is asked for as tool calls.
    - No rule applies: it says "echo: " and the user's message.
    `fail` makes every call raise that ModelError; `delay` makes every call take that long.
    """

    def __init__(self, rules: dict[str, str | Calls] | None = None, *, insist: bool = False,
                 fail: ModelError | None = None, delay: float = 0.0, name: str = "scripted") -> None:
        self.rules = rules or {}
        self.insist = insist
        self.fail = fail
        self.delay = delay
        self.name = name
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        last = request.messages[-1]
        if last.role == "tool" and not self.insist:
            results = [m.content for m in reversed(request.messages) if m.role == "tool"]
            count = next(i for i, m in enumerate(reversed(request.messages)) if m.role != "tool")
            return self._say("tools said: " + " | ".join(reversed(results[:count])))
        said = next(m.content for m in reversed(request.messages) if m.role == "user")
        for key, answer in self.rules.items():
            if key in said:
                if isinstance(answer, str):
                    return self._say(answer)
                calls = [ToolRequest(id=f"call_{len(request.messages)}_{k}", name=name, arguments=args)
                         for k, (name, args) in enumerate(answer)]
                return ModelResponse(text="", tool_calls=calls, provider="scripted", model=self.name)
        return self._say(f"echo: {said}")

    def _say(self, text: str) -> ModelResponse:
        return ModelResponse(text=text, provider="scripted", model=self.name)


class StubModels:
    """The run's models: `client(role, override)` gives the client named by the override (None: the role's)."""

    def __init__(self, **clients: ScriptedModel) -> None:
        self.clients = clients
        self.asked: list[tuple[str, Any]] = []

    def client(self, role: str, override: Any = None) -> ScriptedModel:
        self.asked.append((role, override))
        if isinstance(override, ModelSpec):
            key = f"{override.provider}:{override.model}"
        else:
            key = override if override is not None else role
        if key not in self.clients:
            raise ModelError(f"no model {key!r}: set models.{role}")
        return self.clients[key]


def make_session(tmp_path: Path, models: Any, vars: dict[str, Any] | None = None) -> Session:
    return new_session(tmp_path, vars=vars, models=models)


def make_target(**spec: Any) -> ModelTarget:
    return ModelTarget(ModelTargetSpec.model_validate({"type": "model", **spec}), "bot")


@asynccontextmanager
async def opened(session: Session, **spec: Any) -> AsyncIterator[ModelTarget]:
    target = make_target(**spec)
    await target.open(session)
    try:
        yield target
    finally:
        await target.close()


def roles(request: ModelRequest) -> list[str]:
    return [m.role for m in request.messages]


LOOKUP = {
    "name": "lookup_order",
    "description": "Find an order by its id",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "results": [
        {"when": {"order_id": "ORD-1"}, "result": {"status": "shipped", "id": "{{args.order_id}}"}},
        {"when": {"order_id": "ORD-9[0-9]+"}, "error": "order {{args.order_id}} is archived"},
    ],
    "result": {"status": "unknown", "id": "{{args.order_id}}"},
}


# -- registry and spec -------------------------------------------------------------------------------------


def test_registered_under_model() -> None:
    cls = target_class("model")
    assert cls is ModelTarget
    assert cls.Spec is ModelTargetSpec
    assert cls.kind == "model"


@pytest.mark.parametrize(("spec", "message"), [
    ({"system": "a", "system_file": "b.txt"}, "keep one"),
    ({"tools": [{"name": "x"}, {"name": "x"}]}, "tool x is declared twice"),
    ({"tools": [{"name": "x", "result": 1, "error": "no"}]}, "result or error, not both"),
    ({"tools": [{"name": "x", "results": [{"result": 1, "error": "no"}]}]}, "result or error, not both"),
    ({"tools": [{"name": "bad name!"}]}, "letters, digits"),
    ({"max_tool_rounds": -1}, "greater than or equal to 0"),
])
def test_spec_rejects_contradictions(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ModelTargetSpec.model_validate({"type": "model", **spec})


def test_spec_reads_model_names_shorthands_and_mappings() -> None:
    assert ModelTargetSpec.model_validate({"type": "model", "model": "cheap"}).model == "cheap"
    spec = ModelTargetSpec.model_validate({"type": "model", "model": {"provider": "openai", "model": "gpt-4o-mini"},
                                           "fallback": "openai:gpt-4o"})
    assert isinstance(spec.model, ModelSpec) and spec.model.model == "gpt-4o-mini"
    assert spec.fallback == "openai:gpt-4o"
    assert spec.max_tool_rounds == 5


# -- text turns --------------------------------------------------------------------------------------------


async def test_text_turns_keep_the_history(tmp_path: Path) -> None:
    model = ScriptedModel({"hours": "We open at 9."})
    models = StubModels(target=model)
    session = make_session(tmp_path, models, vars={"shop": "Acme"})
    async with opened(session, system="You are the {{vars.shop}} assistant.", temperature=0.2,
                      max_tokens=200) as target:
        first = await target.send(UserTurn(text="hello"))
        second = await target.send(UserTurn(text="what are your hours?"))
        assert target.metrics() == {"model_calls": 2.0}
    assert (first.text, second.text) == ("echo: hello", "We open at 9.")
    assert models.asked == [("target", None)]
    request = model.requests[1]
    assert roles(request) == ["system", "user", "assistant", "user"]
    assert [m.content for m in request.messages] == [
        "You are the Acme assistant.", "hello", "echo: hello", "what are your hours?"]
    assert request.purpose == "target" and request.seed is None
    assert (request.temperature, request.max_tokens) == (0.2, 200)
    assert request.tools == []
    assert request.context["message"] == "what are your hours?"
    assert second.raw == [second.response]
    assert second.response["text"] == "We open at 9." and second.response["model"] == "scripted"
    assert second.tool_calls == [] and second.first_token_at_ms is None
    assert 0 < first.sent_at_ms <= first.completed_at_ms <= second.sent_at_ms <= second.completed_at_ms
    assert session.events[0].name == "transport"
    assert session.events[0].data["model"] == "models.target"


async def test_data_travels_as_json_in_the_user_message(tmp_path: Path) -> None:
    model = ScriptedModel()
    session = make_session(tmp_path, StubModels(target=model))
    async with opened(session) as target:
        turn = await target.send(UserTurn(text="my order", data={"id": "ORD-1", "qty": 2}))
    assert roles(model.requests[0]) == ["user"]  # no system prompt, no system message
    assert model.requests[0].messages[0].content == 'my order\n{"id": "ORD-1", "qty": 2}'
    assert turn.text.startswith("echo: my order")


async def test_a_named_model_is_asked_for_by_its_name(tmp_path: Path) -> None:
    models = StubModels(cheap=ScriptedModel({"hi": "hello from cheap"}))
    session = make_session(tmp_path, models)
    async with opened(session, model="cheap") as target:
        turn = await target.send(UserTurn(text="hi"))
    assert turn.text == "hello from cheap"
    assert models.asked == [("target", "cheap")]


# -- tools -------------------------------------------------------------------------------------------------


async def test_tool_calls_are_answered_from_the_declared_results(tmp_path: Path) -> None:
    model = ScriptedModel({
        "two orders": [("lookup_order", {"order_id": "ORD-1"}), ("lookup_order", {"order_id": "ORD-2"})],
        "archived": [("lookup_order", {"order_id": "ORD-95"})],
    })
    session = make_session(tmp_path, StubModels(target=model))
    async with opened(session, tools=[LOOKUP]) as target:
        turn = await target.send(UserTurn(text="where are my two orders?"))
        archived = await target.send(UserTurn(text="and the archived one?"))
        assert target.metrics() == {"model_calls": 4.0}
    assert [(c.name, c.args, c.result, c.kind) for c in turn.tool_calls] == [
        ("lookup_order", {"order_id": "ORD-1"}, {"status": "shipped", "id": "ORD-1"}, "tool"),
        ("lookup_order", {"order_id": "ORD-2"}, {"status": "unknown", "id": "ORD-2"}, "tool"),
    ]
    assert turn.text == ('tools said: {"status": "shipped", "id": "ORD-1"} | '
                         '{"status": "unknown", "id": "ORD-2"}')
    assert len(turn.raw) == 2 and turn.response == turn.raw[-1]
    assert turn.raw[0]["tool_calls"][0]["name"] == "lookup_order"
    offered = model.requests[0].tools[0]
    assert (offered.name, offered.description) == ("lookup_order", "Find an order by its id")
    assert offered.parameters["required"] == ["order_id"]
    assert archived.tool_calls[0].result == {"error": "order ORD-95 is archived"}
    assert archived.text == 'tools said: {"error": "order ORD-95 is archived"}'
    # The history holds the calls and their results, each result tied to its call.
    history = model.requests[-1].messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant", "user", "assistant",
                                         "tool"]
    assert history[2].tool_call_id == history[1].tool_calls[0].id
    assert history[3].tool_call_id == history[1].tool_calls[1].id and history[3].name == "lookup_order"


async def test_tool_answers_error_null_unknown_and_unmatched(tmp_path: Path) -> None:
    model = ScriptedModel({
        "pay": [("charge_card", {"amount": 12})],
        "ping": [("ping", {})],
        "invent": [("delete_everything", {})],
        "refund": [("refund", {"order_id": "ORD-7"})],
    })
    tools = [
        {"name": "charge_card", "error": "card declined for {{args.amount}} EUR"},
        {"name": "ping"},
        {"name": "refund", "results": [{"when": {"order_id": "ORD-1"}, "result": "refunded"}]},
    ]
    session = make_session(tmp_path, StubModels(target=model))
    async with opened(session, tools=tools) as target:
        paid = await target.send(UserTurn(text="pay please"))
        pinged = await target.send(UserTurn(text="ping"))
        invented = await target.send(UserTurn(text="invent a tool"))
        refunded = await target.send(UserTurn(text="refund it"))
    assert paid.tool_calls[0].result == {"error": "card declined for 12 EUR"}
    assert pinged.tool_calls[0].result is None and pinged.text == "tools said: null"
    assert invented.tool_calls[0].name == "delete_everything"
    assert invented.tool_calls[0].result == {"error": "no tool named delete_everything"}
    assert refunded.tool_calls[0].result == {"error": "no result declared for these arguments"}


async def test_results_may_use_captured_values_and_string_results_go_as_text(tmp_path: Path) -> None:
    model = ScriptedModel({"status": [("order_status", {"order_id": "ORD-42"})]})
    session = make_session(tmp_path, StubModels(target=model))
    session.context = Context(vars={}, captured={"carrier": "DHL"})
    tools = [{"name": "order_status", "results": [
        {"when": {"order_id": "ORD-4.*"}, "result": "{{args.order_id}} is with {{captured.carrier}}"}]}]
    async with opened(session, tools=tools) as target:
        turn = await target.send(UserTurn(text="status?"))
    assert turn.tool_calls[0].result == "ORD-42 is with DHL"
    assert model.requests[-1].messages[-1].content == "ORD-42 is with DHL"  # not a JSON string


async def test_a_result_naming_a_missing_argument_fails_the_turn(tmp_path: Path) -> None:
    model = ScriptedModel({"find": [("lookup_order", {"id": "ORD-1"})]})
    tools = [{"name": "lookup_order", "result": {"id": "{{args.order_id}}"}}]
    session = make_session(tmp_path, StubModels(target=model))
    async with opened(session, tools=tools) as target:
        with pytest.raises(TurnError, match=r"tool lookup_order: cannot write its result: "
                                            r"\{\{args.order_id\}\} has no value .*\"id\": \"ORD-1\""):
            await target.send(UserTurn(text="find my order"))


async def test_max_tool_rounds_reached_is_a_turn_error(tmp_path: Path) -> None:
    model = ScriptedModel({"loop": [("ping", {})]}, insist=True)
    session = make_session(tmp_path, StubModels(target=model))
    async with opened(session, tools=[{"name": "ping", "result": "pong"}], max_tool_rounds=2) as target:
        with pytest.raises(TurnError, match=r"still asked for tools \(ping\) after 2 round\(s\).*max_tool_rounds: 2"
                           ) as failed:
            await target.send(UserTurn(text="loop forever"))
        assert len(model.requests) == 3  # the first call, then one per answered round
        assert len(failed.value.raw) == 3
        # The failed turn left no half-answered tool call behind in the history.
        model.insist = False
        await target.send(UserTurn(text="hello again"))
    assert roles(model.requests[-1]) == ["user"]


async def test_zero_tool_rounds_means_no_tool_may_be_called(tmp_path: Path) -> None:
    model = ScriptedModel({"go": [("ping", {})]})
    session = make_session(tmp_path, StubModels(target=model))
    async with opened(session, tools=[{"name": "ping"}], max_tool_rounds=0) as target:
        with pytest.raises(TurnError, match="after 0 round"):
            await target.send(UserTurn(text="go"))


# -- system_file -------------------------------------------------------------------------------------------


async def test_system_file_is_read_relative_to_the_suite_and_rendered(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "bot.md").write_text("You sell {{vars.product}}.\nBe brief.", encoding="utf-8")
    model = ScriptedModel()
    session = make_session(tmp_path, StubModels(target=model), vars={"product": "shoes"})
    async with opened(session, system_file="prompts/bot.md") as target:
        await target.send(UserTurn(text="hi"))
    assert model.requests[0].messages[0].content == "You sell shoes.\nBe brief."
    assert model.requests[0].messages[0].role == "system"


async def test_a_missing_system_file_or_template_is_an_infra_error(tmp_path: Path) -> None:
    session = make_session(tmp_path, StubModels(target=ScriptedModel()))
    with pytest.raises(InfraError, match=r"model target bot: cannot read system_file nope\.md"):
        await make_target(system_file="nope.md").open(session)
    with pytest.raises(InfraError, match=r"model target bot: system: \{\{vars.missing\}\} has no value"):
        await make_target(system="Hi {{vars.missing}}").open(session)


# -- failures and fallback ---------------------------------------------------------------------------------


async def test_no_models_is_an_infra_error(tmp_path: Path) -> None:
    session = make_session(tmp_path, None)
    with pytest.raises(InfraError, match=r"the model target needs models: .*configure models\.target or the "
                                         r"target's model"):
        await make_target().open(session)


async def test_an_unknown_model_name_is_an_infra_error(tmp_path: Path) -> None:
    session = make_session(tmp_path, StubModels())
    with pytest.raises(InfraError, match=r"^model target bot: no model 'target': set models\.target$"):
        await make_target().open(session)


async def test_a_model_error_is_an_infra_error(tmp_path: Path) -> None:
    failing = ScriptedModel(fail=ModelError("openai: 429 rate limited\n  after 3 retries", retryable=True))
    session = make_session(tmp_path, StubModels(target=failing))
    async with opened(session) as target:
        with pytest.raises(InfraError) as failed:
            await target.send(UserTurn(text="hi"))
    assert str(failed.value) == ("model target bot: the model call failed: models.target: openai: 429 rate "
                                 "limited after 3 retries")
    assert "\n" not in str(failed.value)


async def test_the_fallback_answers_when_the_model_fails(tmp_path: Path) -> None:
    primary = ScriptedModel(fail=ModelError("unreachable: connection refused"))
    backup = ScriptedModel({"hi": "hello from the backup"}, name="backup")
    models = StubModels(target=primary, **{"openai:gpt-4o": backup})
    session = make_session(tmp_path, models)
    async with opened(session, fallback={"provider": "openai", "model": "gpt-4o"}) as target:
        turn = await target.send(UserTurn(text="hi"))
        assert target.metrics() == {"model_calls": 2.0}
    assert turn.text == "hello from the backup"
    assert turn.response["model"] == "backup"
    assert len(primary.requests) == len(backup.requests) == 1
    assert backup.requests[0] == primary.requests[0]  # the same question, asked of another model
    fallback = [e.data for e in session.events if e.name == "model_fallback"]
    assert fallback == [{"model": "openai:gpt-4o", "reason": "models.target: unreachable: connection refused"}]


async def test_the_model_and_its_fallback_failing_is_an_infra_error(tmp_path: Path) -> None:
    models = StubModels(target=ScriptedModel(fail=ModelError("no API key")),
                        spare=ScriptedModel(fail=ModelError("unreachable")))
    session = make_session(tmp_path, models)
    async with opened(session, fallback="spare") as target:
        with pytest.raises(InfraError, match=r"the model and its fallback failed: models\.target: no API key; "
                                             r"spare: unreachable"):
            await target.send(UserTurn(text="hi"))


async def test_a_slow_model_times_the_turn_out(tmp_path: Path) -> None:
    session = make_session(tmp_path, StubModels(target=ScriptedModel(delay=1.0)))
    async with opened(session, turn_timeout="50ms") as target:
        with pytest.raises(TurnError, match=r"turn timed out after 0\.05s"):
            await target.send(UserTurn(text="hi"))


async def test_a_handoff_tool_call_is_a_handoff(tmp_path: Path) -> None:
    model = ScriptedModel({"human": [("transfer_to_human", {"queue": "billing"})]})
    session = make_session(tmp_path, StubModels(target=model))
    spec = {"tools": [{"name": "transfer_to_human", "result": "transferred"}],
            "handoff": {"json_path": "$.tool_calls[?(@.name == 'transfer_to_human')]",
                        "to": "$.tool_calls[0].arguments.queue"}}
    async with opened(session, **spec) as target:
        turn = await target.send(UserTurn(text="a human please"))
    assert turn.handoff is not None and turn.handoff.to == "billing"
    assert json.loads(json.dumps(turn.raw))  # raw is plain JSON


# -- with the real registry and the fake provider ----------------------------------------------------------


async def test_the_fake_provider_drives_the_target_through_the_registry(tmp_path: Path) -> None:
    from tamesu.models.client import ModelRegistry

    rules = [{"when": "order", "tool_calls": [{"name": "lookup_order", "args": {"order_id": "ORD-1"}}],
              "say": "Your order has shipped."},
             {"say": "How can I help?"}]
    registry = ModelRegistry({"target": ModelSpec.model_validate({"provider": "fake", "rules": rules})})
    session = make_session(tmp_path, registry)
    async with opened(session, tools=[LOOKUP]) as target:
        first = await target.send(UserTurn(text="hi"))
        second = await target.send(UserTurn(text="where is my order?"))
    assert first.text == "How can I help?"
    assert second.text == "Your order has shipped."
    assert [(c.name, c.result) for c in second.tool_calls] == [
        ("lookup_order", {"status": "shipped", "id": "ORD-1"})]
    assert second.response["fake"] is True
    with pytest.raises(InfraError, match=r"^model target bot: no model named 'nope' under models:"):
        await make_target(model="nope").open(session)
    await registry.aclose()


def test_a_bad_handoff_path_or_pattern_is_a_load_error(tmp_path: Path, tamesu: Any) -> None:
    """The model target reads `handoff` as rest and grpc do, and its paths and pattern are checked at load
    by the one check they share (on HandoffSpec): a suite problem, not a surprise at the first turn."""
    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "hi" }] }\n')
    (tmp_path / "s.tamesu.yaml").write_text(
        "targets:\n"
        "  bot:\n"
        "    type: model\n"
        "    model: target\n"
        "    handoff: { json_path: \"$.tool_calls[?(@.name ==\" }\n"
        "  pattern: { type: model, model: target, handoff: { regex: \"(\" } }\n"
        "  fine: { type: model, model: target, handoff: { json_path: \"$.tool_calls[0]\", regex: \"a (person|human)\","
        " to: \"$.tool_calls[0].arguments.queue\", summary: \"$.text\" } }\n"
        "tests:\n"
        "  - { name: a, target: fine, scenario: { script: [ { say: hi } ] } }\n")
    done = tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "s.tamesu.yaml:5:14: targets.bot.handoff: json_path: bad JSONPath '$.tool_calls[?(@.name ==': "
        "unexpected end of expression",
        "s.tamesu.yaml:6:51: targets.pattern.handoff: regex: missing ), unterminated subpattern at position 0",
        "2 problems found"]


async def test_a_model_error_that_names_its_model_is_not_named_twice(tmp_path: Path) -> None:
    # the provider's errors begin with the model's label: "the model call failed: spare: spare: HTTP 500"
    models = StubModels(target=ScriptedModel(fail=ModelError("no API key")),
                        spare=ScriptedModel(fail=ModelError("spare: HTTP 500: boom")))
    session = make_session(tmp_path, models)
    async with opened(session, fallback="spare") as target:
        with pytest.raises(InfraError) as failed:
            await target.send(UserTurn(text="hi"))
    assert str(failed.value).endswith("failed: models.target: no API key; spare: HTTP 500: boom"), str(failed.value)


def test_a_turn_that_fails_half_way_keeps_its_tool_calls_and_its_time(tmp_path: Path, tamesu: Any) -> None:
    # before: the failed turn had no tool calls (lookup, answered, was lost) and a latency of 0 ms
    (tmp_path / "s.tamesu.yaml").write_text("""\
models:
  bot:
    provider: fake
    rules: [ { when: order, tool_calls: [ { name: lookup, args: { id: "1" } }, { name: broken } ], say: done } ]
targets:
  shop:
    type: model
    model: bot
    tools:
      - { name: lookup, result: { status: shipped } }
      - { name: broken, result: "{{args.nope}}" }
tests:
  - name: half way
    target: shop
    fuzz_tools: { lookup: { mode: delay, delay: 300ms } }
    scenario: { script: [ { say: "where is my order?" } ] }
    assert: [ { tool_called: lookup } ]
""", encoding="utf-8")
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [result] = list((tmp_path / "out").glob("*/s/half-way/run-1/result.json"))
    run = json.loads(result.read_text())
    assert run["end_reason"] == "turn_failed"
    [turn] = run["turns"]
    assert [(c["name"], c["result"], c["turn"]) for c in turn["agent"]["tool_calls"]] == [
        ("lookup", {"status": "shipped"}, 1)]
    assert [c["name"] for c in run["tool_calls"]] == ["lookup"]
    assert turn["agent"]["completed_at_ms"] - turn["agent"]["sent_at_ms"] >= 300
