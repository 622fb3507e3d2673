"""The deterministic assertions, through the registry as a suite writes them, on hand-built runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.grading import fails, passes, problem, verdict
from tamesu.checks import parse_assertion
from tamesu.checks._compare import compare, same
from tamesu.checks.base import Exchange, RunView
from tamesu.conversation import AgentTurn, Handoff, ToolCall, UserTurn
from tamesu.suite.templates import Context


def make_view(
    *turns: AgentTurn,
    captured: dict[str, Any] | None = None,
    metrics: dict[str, float] | None = None,
    tool_calls: list[ToolCall] | None = None,
    variables: dict[str, Any] | None = None,
    base_dir: Path | None = None,
) -> RunView:
    captured = captured or {}
    variables = variables or {}
    return RunView(
        exchanges=[Exchange(i, UserTurn(text=f"user {i}"), t) for i, t in enumerate(turns, start=1)],
        metrics=metrics or {},
        captured=captured,
        events=[],
        tool_calls=tool_calls or [],
        context=Context(captured=captured, vars=variables, secrets={"TOKEN": "s3cret"}),
        base_dir=base_dir or Path.cwd(),
        vars=variables,
    )


def said(*texts: str) -> RunView:
    return make_view(*(AgentTurn(text=t) for t in texts))


CONVERSATION = said("Hello, how can I help?", "Your order ORD-1234 ships Friday.", "Anything else?")


# ---------------------------------------------------------------- contains / not_contains


async def test_contains_one_and_many() -> None:
    result = await passes({"contains": "ships Friday"}, CONVERSATION)
    assert "turn 2" in result.reason
    await passes({"contains": ["ORD-1234", "Anything"]}, CONVERSATION)
    result = await fails({"contains": ["ORD-1234", "refund"]}, CONVERSATION)
    assert '"refund"' in result.reason and "3 turn(s)" in result.reason


async def test_contains_ignore_case() -> None:
    await fails({"contains": "SHIPS FRIDAY"}, CONVERSATION)
    await passes({"contains": {"value": "SHIPS FRIDAY", "ignore_case": True}}, CONVERSATION)


async def test_contains_on_empty_transcript_fails() -> None:
    result = await fails({"contains": "x"}, make_view())
    assert result.reason == 'expected the agent to say "x"; the agent said nothing in 0 turn(s)'
    result = await fails({"regex": "x+"}, said("", ""))
    assert result.reason == "expected a match for /x+/; the agent said nothing in 2 turn(s)"
    result = await fails({"contains": "x"}, said("Hello"))
    assert result.reason == 'expected the agent to say "x"; not found in 1 turn(s) of agent text: "Hello"'


async def test_not_contains() -> None:
    await passes({"not_contains": ["as an AI", "sorry"]}, CONVERSATION)
    result = await fails({"not_contains": "ORD-1234"}, CONVERSATION)
    assert "turn 2" in result.reason and "ORD-1234" in result.reason
    await passes({"not_contains": "anything ELSE"}, CONVERSATION)
    await fails({"not_contains": {"value": "anything ELSE", "ignore_case": True}}, CONVERSATION)


async def test_contains_on_turn_scopes_to_one_turn() -> None:
    await passes({"contains": "ORD-1234", "on_turn": 2}, CONVERSATION)
    await fails({"contains": "ORD-1234", "on_turn": 1}, CONVERSATION)
    await fails({"contains": "ORD-1234", "on_turn": "last"}, CONVERSATION)
    await passes({"not_contains": "ORD-1234", "on_turn": "last"}, CONVERSATION)
    await fails({"contains": "Hello", "on_turn": 9}, CONVERSATION)


async def test_contains_renders_templates_from_captured_and_vars() -> None:
    run = make_view(AgentTurn(text="Your order ORD-1234 ships Friday."),
                    captured={"order_id": "ORD-1234"}, variables={"day": "Friday"})
    await passes({"contains": ["{{captured.order_id}}", "ships {{vars.day}}"]}, run)
    other = make_view(AgentTurn(text="Your order ORD-1 ships."), captured={"order_id": "ORD-1234"})
    await fails({"contains": "{{captured.order_id}}"}, other)


async def test_a_template_without_value_fails_and_names_it() -> None:
    result = await fails({"contains": "{{captured.order_id}}"}, CONVERSATION)
    assert "{{captured.order_id}}" in result.reason
    result = await fails({"contains": "{{captured.blank}}"}, make_view(AgentTurn(text="x"),
                                                                      captured={"blank": ""}))
    assert "empty" in result.reason


def test_contains_rejects_empty_text() -> None:
    assert problem({"contains": ""}).loc == ("contains",)
    problem({"contains": []})
    problem({"not_contains": ["a", ""]})


def test_contains_refuses_a_patterns_flags_it_would_take_as_text() -> None:
    # before: `contains: "(?i)unavailable"` looked for the text "(?i)unavailable", so an agent that said
    # "unavailable" failed, blamed; `not_contains: "(?i)sorry"` passed every run, checking nothing
    found = problem({"contains": "(?i)unavailable"})
    assert found.loc == ("contains",)
    assert found.message == ("'(?i)unavailable' begins with a pattern's flags, (?i), but contains and not_contains "
                             "match text as written: write it as regex (not_regex), or as {value: 'unavailable', "
                             "ignore_case: true}")
    assert "(?is)" in problem({"not_contains": ["fine", "(?is)sorry.*"]}).message
    parse_assertion({"contains": "a (?i) b"})  # text that holds the flags past its start is text
    parse_assertion({"regex": "(?i)unavailable"})


def test_unknown_option_is_a_parse_error() -> None:
    found = problem({"contains": {"value": "x", "ignorecase": True}})
    assert found.loc == ("contains", "ignorecase")
    assert found.message == "not a contains option (did you mean 'ignore_case'?)"
    assert found.at_key
    assert problem({"equals": {"value": 1, "path": "$.x", "xyzzy": 1}}).message == "not an equals option"


# ---------------------------------------------------------------- regex / not_regex


async def test_regex() -> None:
    result = await passes({"regex": r"ORD-\d{4}"}, CONVERSATION)
    assert "ORD-1234" in result.reason and "turn 2" in result.reason
    result = await fails({"regex": r"order #\d{6}"}, CONVERSATION)
    assert r"/order #\d{6}/" in result.reason
    await fails({"regex": "your ORDER"}, CONVERSATION)
    await passes({"regex": {"pattern": "your ORDER", "ignore_case": True}}, CONVERSATION)


async def test_not_regex() -> None:
    await passes({"not_regex": r"[\w.]+@[\w.]+"}, CONVERSATION)
    result = await fails({"not_regex": r"ORD-\d+"}, CONVERSATION)
    assert "ORD-1234" in result.reason
    await passes({"not_regex": {"pattern": "HELLO"}}, CONVERSATION)
    await fails({"not_regex": {"pattern": "HELLO", "ignore_case": True}}, CONVERSATION)


async def test_regex_inserts_captured_values_literally() -> None:
    run = make_view(AgentTurn(text="ref A.B"), captured={"ref": "A.B", "other": "A+B"})
    await passes({"regex": r"^ref {{captured.ref}}$"}, run)
    await fails({"regex": r"^ref {{captured.other}}$"}, run)
    await fails({"regex": r"^ref {{captured.missing}}$"}, run)


def test_invalid_regex_is_a_parse_error() -> None:
    found = problem({"regex": "order (#"})
    assert found.loc == ("regex",)
    assert "invalid regular expression" in found.message
    found = problem({"not_regex": {"pattern": "[a-"}})
    assert found.loc == ("not_regex", "pattern")


# ---------------------------------------------------------------- json_path

ORDER_TURNS = make_view(
    AgentTurn(text="a", response={"status": "pending", "items": [{"sku": "A", "qty": 1}]}),
    AgentTurn(text="b", response={"status": "refunded", "total": 42.5, "code": "R-7",
                                  "items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 2}]}),
    AgentTurn(text="c", response={"message": "bye"}),
)


async def test_json_path_reads_the_last_turn_that_matches() -> None:
    result = await passes({"json_path": {"path": "$.status", "equals": "refunded"}}, ORDER_TURNS)
    assert "turn 2" in result.reason
    result = await fails({"json_path": {"path": "$.status", "equals": "pending"}}, ORDER_TURNS)
    assert '"pending"' in result.reason and '"refunded"' in result.reason
    await passes({"json_path": {"path": "$.status", "equals": "pending"}, "on_turn": 1}, ORDER_TURNS)
    await fails({"json_path": {"path": "$.status"}, "on_turn": "last"}, ORDER_TURNS)


async def test_json_path_comparisons() -> None:
    cases: list[tuple[dict[str, Any], bool]] = [
        ({"path": "$.status", "not_equals": "pending"}, True),
        ({"path": "$.status", "not_equals": "refunded"}, False),
        ({"path": "$.code", "matches": "^R-\\d$"}, True),
        ({"path": "$.code", "matches": "^X"}, False),
        ({"path": "$.status", "contains": "fund"}, True),
        ({"path": "$.status", "contains": "nope"}, False),
        ({"path": "$.items[*].sku", "contains": "B"}, True),
        ({"path": "$.items[*].sku", "contains": ["A", "B"]}, True),
        ({"path": "$.items[*].sku", "contains": "C"}, False),
        ({"path": "$.items[1]", "contains": {"sku": "B"}}, True),
        ({"path": "$.total", "gt": 42}, True),
        ({"path": "$.total", "gt": 42.5}, False),
        ({"path": "$.total", "gte": 42.5}, True),
        ({"path": "$.total", "lt": 43, "gte": 40}, True),
        ({"path": "$.total", "lte": 42}, False),
        ({"path": "$.status", "gt": 1}, False),
        ({"path": "$.items", "length": 2}, True),
        ({"path": "$.items", "length": 3}, False),
        ({"path": "$.total", "length": 1}, False),
        ({"path": "$.total", "equals": "42.5"}, True),
        ({"path": "$.items[*].qty", "equals": [1, 2]}, True),
        ({"path": "$.refund_id", "exists": False}, True),
        ({"path": "$.status", "exists": False}, False),
        ({"path": "$.status", "exists": True}, True),
        ({"path": "$.refund_id"}, False),
        ({"path": "$.items[?@.qty > 1].sku", "equals": "B"}, True),
    ]
    for options, expected in cases:
        result = await verdict({"json_path": options}, ORDER_TURNS)
        assert result.passed is expected, (options, result.reason)


async def test_json_path_shorthand_means_exists() -> None:
    await passes({"json_path": "$.total"}, ORDER_TURNS)
    result = await fails({"json_path": "$.refund_id"}, ORDER_TURNS)
    assert "$.refund_id" in result.reason and "found none" in result.reason
    assert result.evidence and "bye" in result.evidence[0]


async def test_json_path_equals_null() -> None:
    run = make_view(AgentTurn(response={"error": None}))
    await passes({"json_path": {"path": "$.error", "equals": None}}, run)
    await fails({"json_path": {"path": "$.error", "not_equals": None}}, run)


async def test_equals_null_means_json_null_everywhere() -> None:
    # the reply was once compared with Python's text of the value: `equals: null` passed on "None"
    await fails({"equals": None}, said("None"))
    await passes({"equals": None}, said("null"))
    await fails({"equals": True}, said("True"))
    await passes({"equals": True}, said("true"))
    run = make_view(AgentTurn(response={"n": None, "s": "None"}))
    await passes({"equals": {"value": None, "path": "$.n"}}, run)
    await fails({"equals": {"value": None, "path": "$.s"}}, run)
    # where a value is never null, `equals: null` is a problem where written, not a test that always fails
    assert problem({"turns": {"equals": None}}).message == "expected a number of turns, not null"
    assert problem({"turns": None}).loc == ("turns",)
    assert problem({"metric": {"name": "turns", "equals": None}}).loc == ("metric", "equals")
    assert "exists: false" in problem({"captured": {"name": "x", "equals": None}}).message


async def test_equals_at_a_path_is_json_equality_not_pythons() -> None:
    # Python says True == 1 and [True] == [1]: `equals: {value: true, path: $.n}` passed on a count of 1
    run = make_view(AgentTurn(response={"n": 1, "flags": [1, 0], "ok": True, "x": 2.0}))
    await fails({"equals": {"value": True, "path": "$.n"}}, run)
    await fails({"equals": {"value": [True, False], "path": "$.flags"}}, run)
    await fails({"equals": {"value": 1, "path": "$.ok"}}, run)
    await passes({"equals": {"value": True, "path": "$.ok"}}, run)
    await passes({"equals": {"value": [1, 0], "path": "$.flags"}}, run)
    await passes({"equals": {"value": 2, "path": "$.x"}}, run)  # one JSON number, however written


async def test_json_path_falls_back_to_raw_events() -> None:
    events = [{"type": "delta", "text": "he"}, {"type": "done", "usage": {"tokens": 12}}]
    run = make_view(AgentTurn(text="hello", response={"text": "hello"}, raw=events))
    result = await passes({"json_path": {"path": "$[?@.type == 'done'].usage.tokens", "equals": 12}}, run)
    assert "raw events of turn 1" in result.reason
    # The response wins when it matches.
    await passes({"json_path": {"path": "$.text", "equals": "hello"}}, run)
    # the events are one array, as docs/targets/rest.md says: a field of an earlier event by `$[*]`, not `$.`
    await passes({"json_path": {"path": "$[*].usage.tokens", "equals": 12}}, run)
    await fails({"json_path": {"path": "$.usage.tokens", "equals": 12}}, run)


async def test_json_path_parses_a_json_text_response() -> None:
    await passes({"json_path": {"path": "$.ok", "equals": True}}, make_view(AgentTurn(response='{"ok": true}')))
    await fails({"json_path": "$.ok"}, make_view(AgentTurn(response="not json")))


async def test_json_path_with_no_documents_says_so() -> None:
    result = await fails({"json_path": "$.x"}, said("hi"))
    assert "none with a response" in result.reason


async def test_json_path_renders_templates() -> None:
    run = make_view(AgentTurn(response={"orders": [{"id": "ORD-1", "state": "open"}]}),
                    captured={"order_id": "ORD-1", "state": "open"})
    await passes({"json_path": {"path": "$.orders[?@.id == '{{captured.order_id}}'].state",
                                "equals": "{{captured.state}}"}}, run)
    await fails({"json_path": {"path": "$.orders[0].id", "matches": "^{{captured.state}}$"}}, run)
    result = await fails({"json_path": {"path": "$.orders[0].id", "equals": "{{captured.nope}}"}}, run)
    assert "{{captured.nope}}" in result.reason


def test_json_path_parse_errors() -> None:
    found = problem({"json_path": "$.["})
    assert found.loc == ("json_path",) and "invalid JSONPath" in found.message
    found = problem({"json_path": {"path": "$.a", "matches": "(x"}})
    assert found.loc == ("json_path", "matches")
    found = problem({"json_path": {"path": "$.a", "exists": False, "equals": 1}})
    assert "exists: false" in found.message
    found = problem({"json_path": {"path": "$.a", "equal": 1}})
    assert found.loc == ("json_path", "equal")
    problem({"json_path": {"equals": 1}})


# ---------------------------------------------------------------- status


def statuses(*codes: int | None) -> RunView:
    return make_view(*(AgentTurn(text="x", status=code) for code in codes))


async def test_status_forms() -> None:
    run = statuses(200, 201)
    await passes({"status": "2xx"}, run)
    await fails({"status": 200}, run)
    await passes({"status": [200, 201]}, run)
    await passes({"status": {"in": [200, "2xx"]}}, run)
    await passes({"status": {"equals": 200}, "on_turn": 1}, run)
    result = await fails({"status": {"equals": 200}}, run)
    assert "turn 2 was 201" in result.reason and "200" in result.reason


async def test_status_without_http_fails() -> None:
    result = await fails({"status": 200}, statuses(200, None))
    assert "turn 2 has no HTTP status" in result.reason
    result = await fails({"status": 200}, make_view())
    assert "no agent turns" in result.reason


def test_status_parse_errors() -> None:
    assert "HTTP status" in problem({"status": "2xy"}).message
    problem({"status": 99})
    problem({"status": {}})
    problem({"status": {"equals": 200, "in": [201]}})


# ---------------------------------------------------------------- turns


async def test_turns() -> None:
    await passes({"turns": 3}, CONVERSATION)
    result = await fails({"turns": 2}, CONVERSATION)
    assert "expected 2, found 3" in result.reason
    await passes({"turns": {"lte": 6}}, CONVERSATION)
    result = await fails({"turns": {"lt": 3}}, CONVERSATION)
    assert "< 3" in result.reason
    await passes({"turns": {"gt": 2, "gte": 3}}, CONVERSATION)
    await fails({"turns": {"gte": 4}}, CONVERSATION)
    problem({"turns": {}})
    problem({"turns": True})


# ---------------------------------------------------------------- metric


async def test_metric() -> None:
    run = make_view(metrics={"time_to_first_audio_ms": 1830.0, "turns": 3})
    await passes({"metric": {"name": "time_to_first_audio_ms", "lt": 2000}}, run)
    result = await fails({"metric": {"name": "time_to_first_audio_ms", "lt": 1500}}, run)
    assert result.reason == "time_to_first_audio_ms: expected < 1500, found 1830"
    await passes({"metric": {"name": "turns", "equals": 3}}, run)
    await fails({"metric": {"name": "turns", "equals": 4}}, run)
    await passes({"metric": {"name": "turns", "gte": 3, "lte": 3}}, run)
    await fails({"metric": {"name": "turns", "gt": 3}}, run)


async def test_metric_not_measured() -> None:
    run = make_view(metrics={"turns": 3, "llm_cost_usd": 0.01})
    result = await fails({"metric": {"name": "silence_gap_max_ms", "lt": 100}}, run)
    assert result.reason == "silence_gap_max_ms was not measured (measured: llm_cost_usd, turns)"
    await passes({"metric": {"name": "silence_gap_max_ms", "lt": 100, "missing": "pass"}}, run)
    # missing: pass changes nothing for a metric that was measured.
    await fails({"metric": {"name": "turns", "lt": 2, "missing": "pass"}}, run)
    # a misspelt name is never measured: the reason says what it may have meant
    result = await fails({"metric": {"name": "llm_cost_ud", "lt": 1}}, run)
    assert result.reason.endswith("; did you mean llm_cost_usd?"), result.reason


def test_metric_parse_errors() -> None:
    problem({"metric": {"name": "turns"}})
    problem({"metric": "turns"})
    problem({"metric": {"name": "turns", "lt": 1, "missing": "skip"}})


# ---------------------------------------------------------------- captured

CAPTURED = make_view(AgentTurn(text="x"), captured={"order_id": "ORD-77", "eta": 3, "carrier": None})


async def test_captured() -> None:
    await passes({"captured": "order_id"}, CAPTURED)
    result = await fails({"captured": "refund_id"}, CAPTURED)
    assert result.reason == "expected a value captured as refund_id, found none (captured: eta, order_id)"
    await fails({"captured": "carrier"}, CAPTURED)
    await passes({"captured": {"name": "order_id", "matches": "^ORD-"}}, CAPTURED)
    result = await fails({"captured": {"name": "order_id", "matches": "^X-"}}, CAPTURED)
    assert "/^X-/" in result.reason and "ORD-77" in result.reason
    await passes({"captured": {"name": "eta", "equals": 3}}, CAPTURED)
    await passes({"captured": {"name": "eta", "equals": "3"}}, CAPTURED)
    await fails({"captured": {"name": "eta", "equals": 4}}, CAPTURED)
    await passes({"captured": {"name": "refund_id", "exists": False}}, CAPTURED)
    await passes({"captured": {"name": "carrier", "exists": False}}, CAPTURED)
    await fails({"captured": {"name": "order_id", "exists": False}}, CAPTURED)


async def test_captured_equals_a_template() -> None:
    run = make_view(captured={"order_id": "ORD-77"}, variables={"expected": "ORD-77", "other": "ORD-1"})
    await passes({"captured": {"name": "order_id", "equals": "{{vars.expected}}"}}, run)
    await fails({"captured": {"name": "order_id", "equals": "{{vars.other}}"}}, run)
    await fails({"captured": {"name": "order_id", "equals": "{{vars.unset}}"}}, run)


def test_captured_parse_errors() -> None:
    problem({"captured": {"name": "x", "exists": False, "equals": 1}})
    problem({"captured": {"name": "x", "matches": "("}})
    problem({"captured": {"name": "x", "contains": "a"}})


# ---------------------------------------------------------------- handoff


def handoff_run(at: int | None, to: str | None = "billing", summary: str | None = None) -> RunView:
    turns = [AgentTurn(text=f"t{i}") for i in range(1, 5)]
    if at is not None:
        turns[at - 1] = AgentTurn(text="transferring", handoff=Handoff(to=to, summary=summary))
    return make_view(*turns)


async def test_handoff_true_and_false() -> None:
    await passes({"handoff": True}, handoff_run(2))
    result = await fails({"handoff": True}, handoff_run(None))
    assert "none in 4 turn(s)" in result.reason
    await passes({"handoff": False}, handoff_run(None))
    result = await fails({"handoff": False}, handoff_run(3))
    assert "turn 3" in result.reason and "billing" in result.reason


async def test_handoff_conditions() -> None:
    run = handoff_run(3, to="billing", summary="Customer wants a refund for ORD-9")
    await passes({"handoff": {"within_turns": 3}}, run)
    result = await fails({"handoff": {"within_turns": 2}}, run)
    assert "within 2" in result.reason and "turn 3" in result.reason
    await passes({"handoff": {"to": "^billing$"}}, run)
    result = await fails({"handoff": {"to": "^sales$"}}, run)
    assert '"billing"' in result.reason
    await fails({"handoff": {"to": "billing"}}, handoff_run(1, to=None))
    await passes({"handoff": {"summary_contains": ["refund", "ORD-9"]}}, run)
    result = await fails({"handoff": {"summary_contains": "invoice"}}, run)
    assert '"invoice"' in result.reason
    await fails({"handoff": {"summary_contains": "refund"}}, handoff_run(1, summary=None))
    await fails({"handoff": {"within_turns": 3}}, handoff_run(None))


async def test_handoff_summary_contains_captured() -> None:
    run = make_view(AgentTurn(handoff=Handoff(summary="about ORD-9")), captured={"order": "ORD-9"})
    await passes({"handoff": {"summary_contains": "{{captured.order}}"}}, run)


class _FakeModels:
    """The run's models, as a fake judge with readable rules: the summary must name the order."""

    def __init__(self) -> None:
        from tamesu.models.fake import FakeProvider

        self.judge = FakeProvider([
            {"rubric": "(?i)summary handed", "context": "ORD-\\d+", "pass": True, "reason": "names the order"},
            {"rubric": "(?i)summary handed", "pass": False, "reason": "the order is missing"},
        ])

    def client(self, role: str, override: Any = None) -> Any:
        assert role == "judge"
        return self.judge


@pytest.mark.parametrize(("summary", "passed", "reason"), [
    ("Customer wants a refund for ORD-9", True, "turn 1 handed over; summary: names the order (fake judge)"),
    ("Customer wants a refund", False, "turn 1 handed over; summary: the order is missing (fake judge)"),
])
async def test_handoff_summary_graded_by_the_judge(summary: str, passed: bool, reason: str) -> None:
    run = make_view(AgentTurn(text="passing you on", handoff=Handoff(summary=summary)))
    run.models = _FakeModels()  # type: ignore[assignment]
    found = await verdict({"handoff": {"summary": "the person taking over learns the order number"}}, run)
    assert (found.passed, found.reason, found.fake) == (passed, reason, True)
    assert found.prompt_version == "handoff.v1+judge.v1"  # its own words, then the judge's


async def test_handoff_summary_without_a_summary_fails() -> None:
    run = make_view(AgentTurn(handoff=Handoff(summary=None)))
    run.models = _FakeModels()  # type: ignore[assignment]
    found = await verdict({"handoff": {"summary": "names the order"}}, run)
    assert not found.passed and found.reason == "turn 1 handed over with no summary to grade"


def test_handoff_parse_errors() -> None:
    problem({"handoff": {"handed_off": False, "summary": "names the order"}})
    problem({"handoff": {"within_turns": 0}})
    problem({"handoff": {"to": "("}})
    problem({"handoff": {"handed_off": False, "within_turns": 2}})


# ---------------------------------------------------------------- tool_called / tool_not_called / tool_sequence

CALLS = [
    ToolCall(name="lookup_order", args={"order_id": "ORD-1", "verbose": True}, turn=1),
    ToolCall(name="reschedule_booking", args={"day": "saturday", "slot": {"hour": 10, "room": "B2"},
                                              "guests": ["ann", "bo"]}, turn=2),
    ToolCall(name="notify", args={"channel": "sms"}, turn=2),
    ToolCall(name="billing", args={"text": "hi"}, kind="delegation", turn=2),
]
TOOLS = make_view(AgentTurn(text="one"), AgentTurn(text="two"), tool_calls=CALLS,
                  captured={"order_id": "ORD-1"})


async def test_tool_called() -> None:
    result = await passes({"tool_called": "reschedule_booking"}, TOOLS)
    assert "turn 2" in result.reason
    result = await fails({"tool_called": "refund"}, TOOLS)
    assert result.reason == ("expected a call to refund; tools called: lookup_order, reschedule_booking, notify, "
                             "billing")
    # A delegation to a remote agent is a call named after the agent (the A2A page's remote agents).
    await passes({"tool_called": "billing"}, TOOLS)


async def test_tool_called_args_subset_regex_and_nesting() -> None:
    cases: list[tuple[dict[str, Any], bool]] = [
        ({"day": "saturday"}, True),
        ({"day": "sunday"}, False),
        ({"day": "sat.*"}, True),
        ({"day": "sat"}, False),  # a full match, not a search
        ({"slot": {"hour": 10}}, True),
        ({"slot": {"hour": "1\\d"}}, True),
        ({"slot": {"hour": 11}}, False),
        ({"slot": {"floor": 1}}, False),
        ({"guests": ["ann", "b."]}, True),
        ({"guests": ["ann"]}, False),
        ({"missing": "x"}, False),
        ({}, True),
    ]
    for args, expected in cases:
        result = await verdict({"tool_called": {"name": "reschedule_booking", "args": args}}, TOOLS)
        assert result.passed is expected, (args, result.reason)
    result = await fails({"tool_called": {"name": "reschedule_booking", "args": {"slot": {"hour": 11}}}}, TOOLS)
    assert "args.slot.hour is 10, expected 11" in result.reason


async def test_tool_called_args_render_templates_and_bools() -> None:
    await passes({"tool_called": {"name": "lookup_order", "args": {"order_id": "{{captured.order_id}}"}}}, TOOLS)
    await passes({"tool_called": {"name": "lookup_order", "args": {"verbose": True}}}, TOOLS)
    await passes({"tool_called": {"name": "lookup_order", "args": {"verbose": "true|yes"}}}, TOOLS)
    await fails({"tool_called": {"name": "lookup_order", "args": {"verbose": 1}}}, TOOLS)
    await fails({"tool_called": {"name": "lookup_order", "args": {"order_id": "{{captured.none}}"}}}, TOOLS)


async def test_tool_called_on_turn() -> None:
    await passes({"tool_called": "notify", "on_turn": 2}, TOOLS)
    await fails({"tool_called": "notify", "on_turn": 1}, TOOLS)


async def test_tool_not_called() -> None:
    await passes({"tool_not_called": "refund"}, TOOLS)
    result = await fails({"tool_not_called": "notify"}, TOOLS)
    assert "turn 2" in result.reason and "sms" in result.reason
    await passes({"tool_not_called": {"name": "notify", "args": {"channel": "email"}}}, TOOLS)
    await fails({"tool_not_called": {"name": "notify", "args": {"channel": "s.s"}}}, TOOLS)
    await fails({"tool_not_called": "billing"}, TOOLS)  # a delegation counts


async def test_tool_sequence() -> None:
    await passes({"tool_sequence": ["lookup_order", "notify"]}, TOOLS)
    await passes({"tool_sequence": {"calls": ["lookup_order", {"name": "reschedule_booking",
                                                               "args": {"day": "saturday"}}]}}, TOOLS)
    result = await fails({"tool_sequence": {"calls": ["notify", "lookup_order"]}}, TOOLS)
    assert "no lookup_order after" in result.reason
    assert "lookup_order -> reschedule_booking -> notify" in result.reason
    await fails({"tool_sequence": {"calls": ["lookup_order", {"name": "notify", "args": {"channel": "x"}}]}},
                TOOLS)
    await fails({"tool_sequence": ["lookup_order", "lookup_order"]}, TOOLS)


async def test_tool_sequence_strict() -> None:
    every = ["lookup_order", "reschedule_booking", "notify", "billing"]  # the delegation is a call too
    await passes({"tool_sequence": {"calls": every, "strict": True}}, TOOLS)
    result = await fails({"tool_sequence": {"calls": ["lookup_order", "notify"], "strict": True}}, TOOLS)
    assert "call 2" in result.reason
    result = await fails({"tool_sequence": {"calls": every[:3], "strict": True}}, TOOLS)
    assert "4 call(s) instead of 3" in result.reason
    result = await fails({"tool_sequence": {"calls": ["lookup_order"], "strict": True}}, make_view())
    assert "no tool calls" in result.reason


def test_tool_parse_errors() -> None:
    problem({"tool_called": {"args": {"a": 1}}})
    problem({"tool_called": {"name": "x", "arguments": {}}})
    problem({"tool_sequence": []})
    problem({"tool_sequence": {"calls": ["a"], "strict": "maybe"}})


# ---------------------------------------------------------------- shared comparison rules


def test_same_forgives_numbers_written_as_text_but_not_bools() -> None:
    assert same("42", 42) and same(42.0, "42") and same("true", True) and same(None, "null")
    assert not same(True, 1) and not same("abc", 1) and not same(1, True)
    assert compare(5, {"gt": 1.0, "lt": 4.0}) == ["expected < 4, found 5"]


def test_registry_errors() -> None:
    assert "unknown assertion" in problem({"containz": "x"}).message
    assert "one kind" in problem({"contains": "x", "regex": "y"}).message
    assert "on_turn" in problem({"contains": "x", "on_turn": 0}).message


class _GroundingModels:
    """A fake judge for grounding: a claim of 'instant refunds' is not in any policy it is shown."""

    def __init__(self) -> None:
        from tamesu.models.fake import FakeProvider

        self.judge = FakeProvider([
            {"check": "grounded", "transcript": "(?i)instant", "pass": False, "reason": "instant is not in the policy"},
            {"check": "grounded", "context": "5 days", "pass": True, "reason": "every claim is in the policy"},
        ])

    def client(self, role: str, override: Any = None) -> Any:
        return self.judge


@pytest.mark.parametrize(("said_text", "passed"), [("Refunds take 5 days.", True), ("Refunds are instant.", False)])
async def test_grounded_reads_its_context_with_a_json_path(said_text: str, passed: bool) -> None:
    run = make_view(AgentTurn(text=said_text, response={"sources": [{"text": "Policy: refunds take 5 days."}]}))
    run.models = _GroundingModels()  # type: ignore[assignment]
    found = await verdict({"grounded": {"context": {"json_path": "$.sources[*].text"}}}, run)
    assert found.passed is passed and found.fake


async def test_grounded_with_an_empty_context_fails_without_asking() -> None:
    run = make_view(AgentTurn(text="Refunds take 5 days.", response={"sources": []}))
    found = await verdict({"grounded": {"context": {"json_path": "$.sources[*].text"}}}, run)
    assert not found.passed and "no context" in found.reason
    # the tool named bare, as the tool checks name it (before, a Python repr: tool 'search_policy')
    no_call = await verdict({"grounded": {"context": {"tool": "search_policy"}}}, run)
    assert not no_call.passed
    assert no_call.reason == "no context to check the claims against: tool search_policy was not called or returned " \
        "nothing", no_call.reason


def test_turns_no_count_can_meet_is_a_problem_where_written() -> None:
    # `turns: {lte: -1}` was taken and failed every run as the agent's fault: a count is never negative
    assert (problem({"turns": {"lte": -1}}).loc, problem({"turns": {"lte": -1}}).message) == (
        ("turns", "lte"), "no number of turns is at most -1: a count is never negative")
    assert problem({"turns": {"lt": 0}}).message == "no number of turns is less than 0: a count is never negative"
    assert problem({"turns": -2}).message == "no number of turns is -2: a count is never negative"
    # nor do bounds that exclude each other
    assert problem({"turns": {"gt": 1, "lt": 2}}).message == "no number of turns meets gt: 1, lt: 2 together"
    assert problem({"turns": {"equals": 2, "gte": 3}}).message == "no number of turns meets equals: 2, gte: 3 together"
    for bounds in ({"lte": 0}, {"lt": 1}, {"gte": 2, "lte": 2}, {"gt": 1, "lt": 3}, 0):
        parse_assertion({"turns": bounds})


def test_tool_args_patterns_that_backtrack_for_ever_are_refused_where_written() -> None:
    # an args string is tried as a full pattern on the agent's arguments: `(a+)+` was taken, though on some
    # arguments it holds the run past every timeout and signal, as `regex: (a+)+` is refused for
    for entry, where in (({"tool_called": {"name": "lookup", "args": {"q": "(a+)+$"}}}, "args.q"),
                         ({"tool_not_called": {"name": "lookup", "args": {"o": {"ids": ["1", "(\\w+\\s?)+"]}}}},
                          "args.o.ids[1]"),
                         ({"tool_sequence": [{"name": "lookup", "args": {"q": "{{captured.id}}(.*)*"}}]}, "args.q")):
        refused = problem(entry)
        assert refused.message.startswith(f"{where}: `") and "repeats a group that itself repeats" in \
            refused.message, refused.message
    # possessive, atomic, not a pattern at all, or not a string: taken
    for args in ({"q": "(a++)+"}, {"q": "(?>a+)+"}, {"q": "(a+"}, {"q": "{{captured.id}}"}, {"n": 3}):
        parse_assertion({"tool_called": {"name": "lookup", "args": args}})


def test_span_patterns_that_backtrack_for_ever_are_refused_where_written() -> None:
    # a span's name (a full pattern) and its attributes' strings (tried as tool args are) are matched on the
    # agent's spans: `(a+)+` in either was taken
    named = problem({"span": {"name": "(a+)+"}})
    assert named.loc == ("span", "name") and "repeats a group that itself repeats" in named.message
    attributed = problem({"span": {"name": "chat", "attributes": {"gen_ai.prompt": ["x", "(\\w+\\s?)+"]}}})
    assert attributed.message.startswith("attributes.gen_ai.prompt[1]: `"), attributed.message
    parse_assertion({"span": {"name": "(?>a+)+", "attributes": {"gen_ai.tool.name": "lookup_(a++)+"}}})
