"""`negate: true` passes exactly when the check fails, except when it could not be checked at all (Assertions: "a
value it reads has none"): a `json_path`, `equals` or `type` at a path the responses do not have, or a `captured`
comparison where nothing was captured, passed negated, so `{json_path: {path: $.total, equals: 0}, negate: true}`
passed an agent that sent no total. Each now fails, negated or not; asking whether there is one (`exists`,
`captured: NAME`) is still decided."""

from __future__ import annotations

from typing import Any

import pytest

from checks.grading import verdict
from checks.test_checks import make_view
from tamesu.checks import parse_assertion
from tamesu.conversation import AgentTurn

RUN = make_view(AgentTurn(text="Your order ships Friday.", response={"status": "shipped", "done": False}),
                captured={"eta": "Friday"})


@pytest.mark.parametrize("entry", [
    {"json_path": {"path": "$.total", "equals": 0}},
    {"json_path": {"path": "$.total", "gt": 10}},
    {"equals": {"path": "$.total", "value": 0}},
    {"type": {"path": "$.total", "value": "number"}},
    {"captured": {"name": "order_id", "matches": "^ORD-"}},
    {"captured": {"name": "order_id", "equals": "ORD-1"}},
])
async def test_a_value_compared_where_there_is_none_fails_negated_or_not(entry: dict[str, Any]) -> None:
    plain = await verdict(entry, RUN)
    negated = await verdict({**entry, "negate": True}, RUN)
    assert (plain.passed, plain.undecided) == (False, True), plain.reason
    assert (negated.passed, negated.undecided) == (False, True), negated.reason
    # its label says it is negated (`not json_path: not decided: ...`); one named by the suite says it itself
    assert negated.reason.startswith("not decided: "), negated.reason
    named = await verdict({**entry, "negate": True, "name": "no total"}, RUN)
    assert named.reason.startswith("negated, but not decided: "), named.reason


async def test_a_negated_checks_label_says_not_and_its_reason_does_not_again() -> None:
    # before: `not json_path: negated: $.total is 0 in turn 1`, negated said twice on every line of a failure
    entry = {"json_path": {"path": "$.total", "exists": False}, "negate": True}
    assert parse_assertion(entry).label == "not json_path"
    plain = await verdict(entry, RUN)
    named = await verdict({**entry, "name": "a total"}, RUN)
    assert plain.reason == named.reason.removeprefix("negated: ") and not plain.reason.startswith("negated"), \
        (plain.reason, named.reason)


@pytest.mark.parametrize(("entry", "passed"), [
    ({"json_path": {"path": "$.total", "exists": True}}, False),
    ({"json_path": {"path": "$.total"}}, False),
    ({"captured": "order_id"}, False),
    ({"json_path": {"path": "$.status", "equals": "pending"}}, False),
    ({"type": {"path": "$.status", "value": "number"}}, False),
])
async def test_whether_there_is_one_is_decided_and_negated(entry: dict[str, Any], passed: bool) -> None:
    plain = await verdict(entry, RUN)
    negated = await verdict({**entry, "negate": True}, RUN)
    assert (plain.passed, plain.undecided, negated.passed) == (passed, False, not passed), plain.reason


async def test_a_failed_type_says_the_type_it_expected() -> None:
    # it said "$.done is false (boolean) in turn 1", which read as a finding, not a failure
    found = await verdict({"type": {"path": "$.done", "value": "string"}}, RUN)
    assert found.reason == "$.done is false (boolean) in turn 1, expected a string"
    found = await verdict({"type": {"path": "$.status", "value": "integer"}}, RUN)
    assert found.reason == '$.status is "shipped" (string) in turn 1, expected an integer'
    found = await verdict({"type": {"path": "$.status", "value": "null"}}, RUN)
    assert found.reason.endswith(", expected null")


@pytest.mark.parametrize(("raw", "label"), [
    ({"type": "equals", "path": "$.status", "value": "shipped", "negate": True}, "not equals \"shipped\""),
    ({"type": "type", "path": "$.status", "value": "string", "negate": True}, "$.status is not string"),
    ({"json_path": {"path": "$.status", "equals": "shipped"}, "negate": True}, "not json_path {\"path\": \"$.status\", "
     "\"equals\": \"shipped\"}"),
])
async def test_a_negated_jsonl_assertion_says_not_once(raw: dict[str, Any], label: str) -> None:
    # before: `not equals "shipped": negated: ...` (said twice), and an untyped one said it nowhere (`json_path ...`)
    from tamesu.jsonl.assertions import to_engine
    from tamesu.plan.targets import Resolver

    assertion = to_engine(raw, Resolver(models={"judge"}, targets=set()))
    found = await assertion.check.evaluate(RUN)
    assert (assertion.label, found.passed) == (label, False), found.reason
    assert not found.reason.startswith("negated"), found.reason
