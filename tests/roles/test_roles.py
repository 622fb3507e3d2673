"""The model roles (simulator, judge, extractor), structured output repair, and the fake provider's rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tamesu.conversation import AgentTurn, Exchange, UserTurn
from tamesu.errors import InfraError
from tamesu.models.base import Message, ModelError, ModelRequest, ModelResponse, Usage
from tamesu.models.fake import FakeProvider
from tamesu.models.fake_rules import UNKNOWN_KIND_HINT
from tamesu.models.spec import ModelSpec
from tamesu.models.structured import find_json, generate_structured
from tamesu.roles import prompt_files as _prompts
from tamesu.roles.extractor import Extractor
from tamesu.roles.judge import Judge, JudgeInput
from tamesu.roles.simulator import ModelSimulator, UserAction
from tamesu.suite.schema import Persona, Scenario, ScriptStep
from tamesu.suite.templates import Context


class ScriptedClient:
    """A model that answers with the given texts in order (the last one repeats) and keeps every request."""

    def __init__(self, *answers: str | dict[str, Any]) -> None:
        self.answers = [a if isinstance(a, str) else json.dumps(a) for a in answers]
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        text = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return ModelResponse(text=text, provider="scripted", model="m1", usage=Usage(input_tokens=1, output_tokens=1))


class Recording:
    """Wraps a client and keeps the requests it was given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.generate(request)


def fake(*rules: dict[str, Any], model: str = "") -> FakeProvider:
    return FakeProvider.from_spec(ModelSpec(provider="fake", model=model, rules=list(rules)), None)


def talk(*pairs: tuple[str | None, str]) -> list[Exchange]:
    """Exchanges from (user text, agent text) pairs; a user text of None is a turn the agent opened."""
    return [
        Exchange(index, UserTurn(text=user, source="simulator") if user is not None else None, AgentTurn(text=agent))
        for index, (user, agent) in enumerate(pairs, start=1)
    ]


def simulator_request(**context: Any) -> ModelRequest:
    return ModelRequest(purpose="simulator", messages=[Message(role="user", content="three words here")],
                        context=context)


# --- the fake provider -------------------------------------------------------------------------------------


async def test_fake_simulator_says_the_goal_then_answers_from_rules_then_stops() -> None:
    provider = fake({"when": "(?i)order number", "say": "It is ORD-1001"}, {"when": "(?i)anything else", "stop": True})

    first = json.loads((await provider.generate(simulator_request(goal="Where is my refund?"))).text)
    assert first["input"] == "Where is my refund?"

    asked = await provider.generate(simulator_request(goal="g", simulator_turns=1, last_agent="Your ORDER NUMBER?"))
    assert json.loads(asked.text)["input"] == "It is ORD-1001"

    done = json.loads((await provider.generate(
        simulator_request(goal="g", simulator_turns=2, last_agent="Anything else?"))).text)
    assert done["stop"] is True

    lost = json.loads((await provider.generate(
        simulator_request(goal="g", simulator_turns=2, last_agent="The weather is nice"))).text)
    assert lost["stop"] is True and lost["input"] == ""
    assert lost["reasoning"] == "fake simulator: no rule for the agent's last turn"


async def test_fake_responses_are_labelled_and_count_words() -> None:
    response = await fake({"say": "okay then"}, model="rules-v2").generate(
        simulator_request(simulator_turns=1, last_agent="hi"))
    assert (response.fake, response.provider, response.model) == (True, "fake", "rules-v2")
    assert response.usage.input_tokens == 3
    assert response.usage.output_tokens == len(response.text.split())
    unnamed = await fake({"say": "x"}).generate(simulator_request(simulator_turns=1))
    assert unnamed.model == "fake"


async def test_fake_answers_in_the_requested_schema_shape() -> None:
    class Shape(BaseModel):
        input: str
        extra: list[str]

    request = simulator_request(goal="hello").model_copy(update={"json_schema": Shape.model_json_schema()})
    answer = json.loads((await fake().generate(request)).text)
    assert answer == {"input": "hello", "extra": []}


async def test_fake_judge_decides_from_the_first_rule_whose_conditions_all_hold() -> None:
    provider = fake(
        {"rubric": "(?i)refund", "transcript": r"RF-\d+", "pass": True, "reason": "gave a reference"},
        {"rubric": "(?i)refund", "pass": False, "reason": "no reference"},
    )
    verdict = await Judge(provider).grade(JudgeInput(
        rubric="The agent gives a Refund reference",
        transcript=[{"role": "user", "text": "refund?", "turn": 1}, {"role": "agent", "text": "Ref RF-42", "turn": 1}]))
    assert verdict.passed and verdict.score == 1 and verdict.reason == "gave a reference"
    assert verdict.evidence == ["RF-42"]  # what `transcript` matched, by default
    assert verdict.fake and verdict.model == "fake:fake"

    failed = await Judge(provider).grade(JudgeInput(
        rubric="refund reference", transcript=[{"role": "agent", "text": "Sorry, no idea", "turn": 1}]))
    assert not failed.passed and failed.score == 0 and failed.reason == "no reference"


async def test_fake_judge_not_transcript_and_context_conditions() -> None:
    provider = fake(
        {"not_transcript": "(?i)sorry", "context": "policy", "pass": True},
        {"pass": False, "reason": "fallback"},
    )
    lines = [{"role": "agent", "text": "Done", "turn": 1}]
    assert (await Judge(provider).grade(JudgeInput(rubric="r", transcript=lines, context="the policy"))).passed
    assert not (await Judge(provider).grade(JudgeInput(rubric="r", transcript=lines))).passed
    sorry = [{"role": "agent", "text": "Sorry", "turn": 1}]
    assert not (await Judge(provider).grade(JudgeInput(rubric="r", transcript=sorry, context="policy"))).passed


async def test_a_fake_judge_with_no_matching_rule_fails_loudly() -> None:
    provider = fake({"rubric": "(?i)refund", "pass": True})
    request = ModelRequest(purpose="judge", messages=[], context={"rubric": "The agent is polite", "transcript": []})
    with pytest.raises(ModelError, match='fake judge: no rule matches rubric "The agent is polite"') as caught:
        await provider.generate(request)
    assert not caught.value.retryable

    with pytest.raises(InfraError, match=r'^fake judge: no rule matches rubric "The agent is polite"'):
        await Judge(provider).grade(JudgeInput(rubric="The agent is polite"))
    with pytest.raises(InfraError, match="no rule matches"):
        await Judge(fake()).grade(JudgeInput(rubric="anything"))  # no rules at all: never a pass


async def test_fake_extract_rules() -> None:
    provider = fake(
        {"description": "(?i)order number", "pattern": r"order (ORD-\d+)"},
        {"description": "(?i)carrier", "text": "UPS", "value": "UPS"},
        {"description": "(?i)carrier", "value": None},
    )
    extractor = Extractor(provider)
    assert await extractor.extract("the order number", "Your order ORD-77 ships today") == "ORD-77"
    assert await extractor.extract("the order number", "It ships today") is None
    assert await extractor.extract("the carrier", "UPS brings it") == "UPS"
    assert await extractor.extract("the carrier", "A van brings it") is None
    assert all(r.fake for r in extractor.responses) and len(extractor.responses) == 4
    with pytest.raises(InfraError, match='fake extract: no rule matches description "the colour"'):
        await extractor.extract("the colour", "It is blue")


async def test_fake_model_target_calls_tools_then_says() -> None:
    provider = fake(
        {"when": "(?i)where is order (\\d+)", "tool_calls": [{"name": "lookup_order", "args": {"id": "1"}}],
         "say": "It arrives Friday"},
        {"when": "(?i)hello", "say": "Hi! How can I help?"},
    )
    asked = [Message(role="user", content="Where is order 1?")]
    first = await provider.generate(ModelRequest(purpose="target", messages=asked))
    assert first.text == "" and [c.name for c in first.tool_calls] == ["lookup_order"]
    assert first.tool_calls[0].arguments == {"id": "1"}

    answered = [*asked, Message(role="assistant", tool_calls=first.tool_calls),
                Message(role="tool", content='{"eta": "Friday"}', tool_call_id=first.tool_calls[0].id)]
    second = await provider.generate(ModelRequest(purpose="target", messages=answered))
    assert second.text == "It arrives Friday" and not second.tool_calls

    hello = await provider.generate(ModelRequest(purpose="counterpart", messages=[], context={"message": "hello"}))
    assert hello.text == "Hi! How can I help?"
    with pytest.raises(ModelError, match='fake target: no rule matches the message "bye"'):
        await provider.generate(ModelRequest(purpose="target", messages=[Message(role="user", content="bye")]))
    # a long message on lines of its own: one line, cut at a word with … inside the quotes (a Python repr of its first
    # 80 characters was cut mid-word, with `\n` and no sign of the cut)
    long = "Can you\nhelp me? " + "It is about my order. " * 10
    with pytest.raises(ModelError) as caught:
        await provider.generate(ModelRequest(purpose="target", messages=[Message(role="user", content=long)]))
    assert str(caught.value) == ('fake target: no rule matches the message "Can you help me? It is about my order. '
                                 'It is about my order. It is about my…"')


@pytest.mark.parametrize(("rule", "problem"), [
    ({"when": "(unclosed", "say": "x"}, r"^rules\[0\]\.when: '\(unclosed' is not a valid regular"),
    ({"when": "x"}, r"^rules\[0\]: a rule with `when` needs say"),
    ({"rubric": "x", "reason": "y"}, r"^rules\[0\]: missing required key 'pass'"),
    ({"description": "x", "value": "a", "pattern": "b"}, r"^rules\[0\]: .*not both"),
    ({"wen": "x", "sya": "y"}, r"^rules\[0\]: cannot tell what it is for"),
    ({"when": "x", "say": "y", "stpo": 1}, r"^rules\[0\]\.stpo: not a turn rule key \(did you mean 'stop'\?\)$"),
    ({"check": "grounded", "rubric": "x", "pass": True}, "grounded rule has no rubric"),
])
def test_bad_rules_say_what_is_wrong(rule: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as raised:
        FakeProvider([rule])
    assert "Extra inputs" not in str(raised.value) and "Value error" not in str(raised.value)


def test_a_rule_of_no_kind_names_its_right_keys_as_written() -> None:
    # before: "keys: 'pas' (did you mean 'pass'?), 'reason' (did you mean 'reason'?)"
    with pytest.raises(ValueError) as raised:
        FakeProvider([{"reason": "x", "pas": True}])
    assert str(raised.value) == ("rules[0]: cannot tell what it is for (keys: 'pas' (did you mean 'pass'?), "
                                 "'reason'); " + UNKNOWN_KIND_HINT)


def test_rules_from_python_name_every_bad_rule_by_its_index() -> None:
    """Built from Python there is no file: each bad rule is one line placed by its index, all at once."""
    with pytest.raises(ValueError) as raised:
        FakeProvider([{"when": "hi", "say": "hello"}, {"wen": "x"}, 3, {"rubric": "x", "pas": True},
                      {"rubric": "x", "pass": True}, {"when": "(x", "say": "y"}])
    assert str(raised.value).splitlines() == [
        "rules[1]: cannot tell what it is for (keys: 'wen' (did you mean 'when'?)); " + UNKNOWN_KIND_HINT,
        "rules[2]: a rule is a mapping, got int",
        "rules[3].pas: not a judge rule key (did you mean 'pass'?)",
        "rules[5].when: '(x' is not a valid regular expression: missing ), unterminated subpattern at position 0",
    ]


def test_a_rules_file_places_every_bad_rule_at_its_line_and_column(tmp_path: Path) -> None:
    rules = tmp_path / "judge.yaml"
    rules.write_text('# the judge\'s rules\n- { rubric: "(?i)polite", pass: true }\n- rubric: "(?i)polite"\n'
                     '  pas: false\n- { pas: true }\n- rubric: "([a"\n  pass: true\n- { description: "the order" }\n'
                     '- 3\n', encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        FakeProvider.from_spec(ModelSpec(provider="fake", rules=str(rules)), None)
    lines = str(raised.value).splitlines()
    assert [line.split(": ")[0] for line in lines] == [
        f"{rules}:4:3", f"{rules}:5:3", f"{rules}:6:11", f"{rules}:8:3", f"{rules}:9:3"]
    assert lines[0].endswith(": rules[1].pas: not a judge rule key (did you mean 'pass'?)")
    assert ": rules[3].rubric: '([a' is not a valid regular expression" in lines[2]
    rules.write_text("rules:\n  - { rubric: x, pass: true }\n  - { rubric: y, pas: true }\n", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        FakeProvider.from_spec(ModelSpec(provider="fake", rules=str(rules)), None)
    assert str(raised.value) == f"{rules}:3:18: rules[1].pas: not a judge rule key (did you mean 'pass'?)"


def test_rules_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="must be a list"):
        FakeProvider.from_spec(ModelSpec(provider="fake", rules={"when": "x"}), None)


async def test_rules_from_a_yaml_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "judge-rules.yaml").write_text(
        '- { rubric: "(?i)polite", transcript: "(?i)thank", pass: true, reason: "said thanks" }\n'
        '- rubric: "(?i)polite"\n'
        '  pass: false\n', encoding="utf-8")
    spec = ModelSpec(provider="fake", rules="judge-rules.yaml")
    from_suite = FakeProvider.from_spec(spec, None, base_dir=tmp_path)
    monkeypatch.chdir(tmp_path)
    from_cwd = FakeProvider.from_spec(spec, None)
    for provider in (from_suite, from_cwd):
        verdict = await Judge(provider).grade(JudgeInput(
            rubric="Be polite", transcript=[{"role": "agent", "text": "Thank you!", "turn": 1}]))
        assert verdict.passed and verdict.reason == "said thanks"

    (tmp_path / "bad.yaml").write_text("- { when: x }\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.yaml:1:3: rules\[0\]: a rule with `when` needs say"):
        FakeProvider.from_spec(ModelSpec(provider="fake", rules="bad.yaml"), None)
    with pytest.raises(ValueError, match="cannot read it"):
        FakeProvider.from_spec(ModelSpec(provider="fake", rules="missing.yaml"), None)


# --- structured output -------------------------------------------------------------------------------------


class Pair(BaseModel):
    name: str
    count: int


@pytest.mark.parametrize("text", [
    '{"name": "a", "count": 1}',
    'Here you go:\n```json\n{"name": "a", "count": 1}\n```',
    'Sure. {"name": "a", "count": 1} Hope that helps {}',
    '{broken {"name": "a", "count": 1}',
])
def test_json_is_found_tolerantly(text: str) -> None:
    assert find_json(text) == {"name": "a", "count": 1}


async def test_malformed_json_is_repaired() -> None:
    client = ScriptedClient('```json\n{"name": "a", "count": "many"}\n```', '{"name": "a", "count": 2}')
    request = ModelRequest(purpose="judge", messages=[Message(role="user", content="count it")])
    answer, responses = await generate_structured(client, request, Pair)
    assert answer == Pair(name="a", count=2) and len(responses) == 2
    assert client.requests[0].json_schema == Pair.model_json_schema()
    repair = client.requests[1].messages
    assert repair[1] == Message(role="assistant", content='```json\n{"name": "a", "count": "many"}\n```')
    assert repair[2].role == "user"
    assert repair[2].content.startswith("That was not valid JSON for the schema: count:")
    assert repair[2].content.endswith("Answer with the JSON object only.")
    assert request.json_schema is None  # the caller's request is left as it was


async def test_structured_output_gives_up_after_the_attempts() -> None:
    client = ScriptedClient("I cannot do that")
    request = ModelRequest(purpose="extract", messages=[])
    with pytest.raises(ModelError, match=r"^extract: no valid JSON after 2 attempts: no JSON object found"):
        await generate_structured(client, request, Pair, attempts=2)
    assert len(client.requests) == 2


# --- the simulator -----------------------------------------------------------------------------------------


async def play(simulator: ModelSimulator, agent_says: list[str], context: Context | None = None) -> list[UserAction]:
    """Drive the simulator as the engine does; the agent answers with `agent_says` in order."""
    exchanges: list[Exchange] = []
    actions: list[UserAction] = []
    for reply in [*agent_says, None]:
        action = await simulator.next_turn(exchanges, context or Context())
        actions.append(action)
        if action.turn is None or reply is None:
            break
        exchanges.append(Exchange(len(exchanges) + 1, action.turn, AgentTurn(text=reply)))
    return actions


async def test_simulator_says_the_script_then_the_goal_then_answers() -> None:
    client = Recording(fake({"when": "(?i)order number", "say": "ORD-1001"}))
    scenario = Scenario(goal="Ask where my refund is", script=[ScriptStep(say="Hi there"), ScriptStep(say="Hello?")])
    simulator = ModelSimulator(client, scenario, Persona(name="Alice", style="impatient"), base_dir=Path("."), seed=7)
    actions = await play(simulator, ["Welcome", "Hi", "What is your order number?", "Thanks, bye"])
    said = [(a.turn.source, a.turn.text) for a in actions if a.turn]
    assert said == [("script", "Hi there"), ("script", "Hello?"), ("simulator", "Ask where my refund is"),
                     ("simulator", "ORD-1001")]
    assert actions[-1].stop == "simulator_stopped"
    assert simulator.last_reasoning == "fake simulator: no rule for the agent's last turn"
    assert len(client.requests) == 3 == len(simulator.responses)  # the script costs nothing
    first = client.requests[0]
    assert first.purpose == "simulator" and first.seed == 7 and first.prompt_version == "simulator.v2"
    assert first.context["persona"] == {"name": "Alice", "style": "impatient"}
    assert first.context["goal"] == "Ask where my refund is" and first.context["last_agent"] == "Hi"
    assert [line["text"] for line in first.context["history"]] == ["Hi there", "Welcome", "Hello?", "Hi"]
    assert "impatient" in first.messages[0].content


async def test_a_script_that_fails_never_calls_the_model() -> None:
    client = ScriptedClient({"input": "x"})
    scenario = Scenario(goal="g", script=[ScriptStep(wait_for="press 2")])
    simulator = ModelSimulator(client, scenario, base_dir=Path("."))
    conversation = talk((None, "Welcome"))
    listening = await simulator.next_turn(conversation, Context())
    assert listening.listen == 15 and listening.turn is None  # the wait listens for more of the agent first
    action = await simulator.next_turn(conversation, Context())  # nothing more came
    assert action.stop == "script_done" and action.failure and "press 2" in action.failure
    assert client.requests == []


async def test_stop_when_ends_the_conversation() -> None:
    rules = ({"when": "(?i)moved to saturday", "stop_when_met": True},)
    scenario = Scenario(goal="Move my booking to Saturday", stop_when="the agent confirmed the new date")
    simulator = ModelSimulator(fake(*rules), scenario, base_dir=Path("."))
    actions = await play(simulator, ["Done, moved to Saturday."])
    assert actions[-1] == UserAction(stop="stop_when")
    client = Recording(fake(*rules))  # the condition reaches the model, in its context and its prompt
    await ModelSimulator(client, scenario, base_dir=Path(".")).next_turn([], Context())
    assert client.requests[0].context["stop_when"] == "the agent confirmed the new date"
    assert "the agent confirmed the new date" in client.requests[0].messages[0].content


async def test_stop_when_met_without_a_stop_when_is_a_plain_stop() -> None:
    simulator = ModelSimulator(ScriptedClient({"input": "", "stop_when_met": True}), Scenario(goal="g"),
                               base_dir=Path("."))
    assert (await simulator.next_turn([], Context())).stop == "simulator_stopped"


async def test_goal_achieved_ends_the_conversation() -> None:
    simulator = ModelSimulator(fake({"when": "(?i)refund issued", "goal_achieved": True}),
                               Scenario(goal="Get my refund"), base_dir=Path("."))
    actions = await play(simulator, ["Your refund issued today."])
    assert actions[-1] == UserAction(stop="goal_achieved")


async def test_an_unusable_simulator_answer_is_retried() -> None:
    client = ScriptedClient("", '{"input": "   ", "goal_achieved": false}', '{"input": "Where is it?"}')
    simulator = ModelSimulator(client, Scenario(goal="g"), base_dir=Path("."))
    action = await simulator.next_turn([], Context())
    assert action.turn is not None and action.turn.text == "Where is it?"
    assert len(simulator.responses) == 3
    assert "input is empty" in client.requests[2].messages[-1].content


async def test_empty_simulator_answers_are_an_infrastructure_error() -> None:
    client = ScriptedClient('{"input": "", "goal_achieved": false, "reasoning": "?"}')
    simulator = ModelSimulator(client, Scenario(goal="g"), base_dir=Path("."), attempts=3)
    with pytest.raises(InfraError, match=r"^simulator: no valid JSON after 3 attempts: .*input is empty"):
        await simulator.next_turn([], Context())
    assert len(simulator.responses) == 3  # what the failed attempts cost is still known


async def test_simulator_renders_templates_in_the_goal() -> None:
    client = Recording(fake())
    scenario = Scenario(goal="Return shoes bought {{vars.days}} days ago")
    action = await ModelSimulator(client, scenario, base_dir=Path(".")).next_turn([], Context(vars={"days": "40"}))
    assert action.turn is not None and action.turn.text == "Return shoes bought 40 days ago"


# --- the judge and the extractor ---------------------------------------------------------------------------


@pytest.mark.parametrize(("score", "minimum", "passed"), [(3, 4, False), (4, 4, True), (5, 4, True), (3, 3, True)])
async def test_judge_on_the_1_to_5_scale_passes_by_score_and_min(score: int, minimum: int, passed: bool) -> None:
    # the model's pass follows the prompt (4 or more); the author's minimum decides
    client = ScriptedClient({"pass": score >= 4, "score": score, "reason": "r", "evidence": ["e"]})
    verdict = await Judge(client).grade(JudgeInput(rubric="Helpful", scale="1-5", min=minimum,
                                                   evidence="lenient"))
    assert (verdict.passed, verdict.score, verdict.evidence) == (passed, score, ["e"])
    assert verdict.unsupported_evidence == ["e"]  # the transcript is empty: marked, lenient keeps the verdict


async def test_judge_binary_scores_one_or_zero_and_records_its_call() -> None:
    client = ScriptedClient({"pass": True, "score": 1, "reason": "fine"})
    given = JudgeInput(rubric="Polite", transcript=[{"role": "agent", "text": "Hello", "turn": 1}],
                       tool_calls=[{"name": "lookup", "args": {}}], metrics={"turns": 1})
    verdict = await Judge(client).grade(given)
    assert (verdict.passed, verdict.score, verdict.fake) == (True, 1.0, False)
    assert verdict.model == "scripted:m1" and verdict.prompt_version == "judge.v1"
    request = client.requests[0]
    assert request.temperature == 0 and request.prompt_version == "judge.v1" and request.purpose == "judge"
    assert request.context["rubric"] == "Polite" and request.context["tool_calls"] == [{"name": "lookup", "args": {}}]
    assert request.json_schema is not None and "pass" in request.json_schema["properties"]
    assert "Polite" in request.messages[0].content and "lookup" in request.messages[1].content
    assert "responses" not in verdict.model_dump()


async def test_judge_1_to_5_out_of_range_is_repaired() -> None:
    client = ScriptedClient({"pass": True, "score": 9, "reason": "r"}, {"pass": True, "score": 5, "reason": "r"})
    verdict = await Judge(client).grade(JudgeInput(rubric="x", scale="1-5"))
    assert verdict.score == 5 and len(verdict.responses) == 2


async def test_fake_judge_on_the_1_to_5_scale() -> None:
    provider = fake({"rubric": "great", "pass": False, "score": 3}, {"rubric": "good", "pass": True})
    assert not (await Judge(provider).grade(JudgeInput(rubric="great", scale="1-5"))).passed
    good = await Judge(provider).grade(JudgeInput(rubric="good", scale="1-5"))
    assert good.passed and good.score == 5


async def test_grounding() -> None:
    provider = fake(
        {"check": "grounded", "transcript": "(?i)shipping is free", "pass": False, "score": 0.5,
         "evidence": ["Shipping is free"]},
        {"check": "grounded", "pass": True},
    )
    client = Recording(provider)
    unsupported = await Judge(client).grade_grounding("Returns take 30 days. Shipping is free.", "Returns: 30 days")
    assert not unsupported.passed and unsupported.evidence == ["Shipping is free"] and unsupported.score == 0.5
    assert client.requests[0].context == {"mode": "grounded", "claims": "Returns take 30 days. Shipping is free.",
                                          "context": "Returns: 30 days"}
    assert (await Judge(provider).grade_grounding("Returns take 30 days.", "Returns: 30 days")).passed
    with pytest.raises(InfraError, match="no rule matches"):  # grounded rules never answer rubric checks
        await Judge(provider).grade(JudgeInput(rubric="x"))


async def test_extractor_asks_once_at_temperature_zero() -> None:
    client = ScriptedClient({"found": True, "value": " DHL "})
    assert await Extractor(client).extract("the carrier", "DHL will bring it") == "DHL"
    request = client.requests[0]
    assert (request.purpose, request.temperature, request.prompt_version) == ("extract", 0, "extract.v1")
    assert request.context == {"description": "the carrier", "text": "DHL will bring it"}
    assert await Extractor(client).extract("the carrier", "   ") is None
    assert len(client.requests) == 1


# --- prompts -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("role", "newest", "sections"), [
    # v2: the JSONL simulator's run context (turn count, tool results); YAML suites load v1 by number
    ("simulator", 2, {"system", "stop_when", "no_stop_when", "user", "tool_results", "no_tool_results"}),
    ("judge", 1, {"system", "scale binary", "scale 1-5", "user", "grounded system", "grounded user"}),
    ("extract", 1, {"system", "user"}),
    ("grounded", 1, {"system", "user"}),
    ("golden", 1, {"rubric"}),
    ("handoff", 1, {"rubric"}),
])
def test_prompts_are_versioned_data_files(role: str, newest: int, sections: set[str]) -> None:
    prompt = _prompts.load(role)
    assert prompt.version == f"{role}.v{newest}" and set(prompt.sections) == sections
    assert _prompts.load(role, newest) == prompt
    with pytest.raises(LookupError):
        _prompts.load(role, 99)
    with pytest.raises(KeyError):
        prompt.render("user" if "user" in sections else "missing")  # every placeholder must be given


def test_a_wait_past_its_timeout_looks_late_while_its_looks_bring_utterances() -> None:
    """Every utterance heard before a `wait_for`'s end counts: a listening that brought one, however late it ended
    (tamesu's speech-to-text behind), is followed by a late look (a listen of 0 s or less: how long ago the wait
    ended), and only a look that brought nothing ends the wait. Before, the wait ended at its timeout."""
    import time as clock

    from tamesu.roles.wait_for import WaitFor
    from tamesu.suite.schema import ScriptStep

    step, waiting = ScriptStep(wait_for="press 2", timeout=0.05), WaitFor()
    exchanges = [Exchange(1, None, AgentTurn(text="Thank you for calling."))]
    assert waiting.keep_listening(1, step, exchanges) == 0.05  # the first look: the whole timeout
    exchanges.append(Exchange(2, None, AgentTurn(text="Press 1 for appointments.")))
    clock.sleep(0.1)  # the look brought an utterance, read past the end
    late = waiting.keep_listening(1, step, exchanges)
    assert late is not None and -0.5 < late <= -0.05, late
    assert waiting.keep_listening(1, step, exchanges) is None  # the late look brought nothing: over
