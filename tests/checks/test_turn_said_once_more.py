"""A check on one turn (`on_turn: N`) is said with its turn beside it (`handoff (turn 2): ...`); session 36 made
`json_path`, `equals`, `similar_to` and `not_contains` say "the response"/"the answer" there, but the turn was still
said twice by a spoken turn's `contains`/`not_contains`/`regex`/`not_regex` (`turn 1 said it aloud`), `handoff`
(`turn 2 handed over`), `golden` in `mode: similar` (`least similar: turn 1`), a pack's part (`pack X (turn 2):
...; turn 2 has ...`) and a JSONL checkpoint (`✓ ask_type (turn 1) ...: reached at turn 1: found "type" (turn 1)`).
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

import forked
from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from example_shop import example_shop
from tamesu.checks import parse_assertion
from tamesu.checks.base import Exchange, RunView
from tamesu.conversation import AgentTurn, UserTurn
from tamesu.suite.templates import Context

__all__ = ["expense_agent"]

HEARD = "Press one for appointment. Two for billing."


async def _spoken(entry: dict[str, Any]) -> str:
    """The reason of `entry` on turn 2 of a call, graded as grading does (`scoped(on_turn, labelled=True)`)."""
    turns = [Exchange(i, UserTurn(text="hi"), AgentTurn(text=HEARD, spoken=True)) for i in (1, 2)]
    view = RunView(exchanges=turns, metrics={}, captured={}, events=[], tool_calls=[], context=Context(),
                   base_dir=Path.cwd())
    assertion = parse_assertion({**entry, "on_turn": 2})
    return (await assertion.check.evaluate(view.scoped(assertion.on_turn, labelled=True))).reason


async def test_a_spoken_turns_check_on_one_turn_leaves_the_turn_to_its_label() -> None:
    said = {
        "not_contains": await _spoken({"not_contains": "press 2 for billing"}),
        "regex": await _spoken({"regex": r"press 1"}),
        "not_regex": await _spoken({"not_regex": r"press 1"}),
        "contains": await _spoken({"contains": "press 2 for billing"}),
        "missing": await _spoken({"contains": "press 3 for pharmacy"}),
    }
    assert said["not_contains"].startswith('expected the agent never to say "press 2 for billing"; the answer '
                                           "said it aloud: heard"), said
    assert said["regex"].startswith("the answer matches as spoken"), said
    assert said["not_regex"].startswith("expected no match for /press 1/; the answer has"), said
    assert said["contains"].startswith('found "press 2 for billing" as speech (heard'), said
    assert 'not found in the answer: "Press one' in said["missing"], said
    for reason in said.values():
        assert "turn" not in reason, said  # `not_contains (turn 2): ...`: the label says it


SUITE = """\
name: said-once
targets:
  shop:
    type: rest
    url: "{{env.SHOP_URL}}/chat"
    request: { body: { message: "{{message}}", session_id: "{{session}}" } }
    response: { text: $.reply, done: $.done }
    handoff: { json_path: $.handoff, to: $.handoff.queue, summary: $.handoff.summary }
packs:
  mine:
    description: the shop says no colleague
    assert:
      - not_regex: colleague
        on_turn: 2
      - not_contains: colleague
        on_turn: last
      - contains: sneakers
        on_turn: 1
tests:
  - name: handed over
    target: shop
    scenario:
      script:
        - say: "Hi, where is my order ORD-1001?"
        - say: "Can I talk to a human please?"
    assert:
      - handoff: false
        on_turn: 2
      - handoff: { within_turns: 1 }
        on_turn: 2
      - golden: { file: golden/first.txt, mode: similar }
        on_turn: 1
      - pack: mine
      - pack: mine
        on_turn: 2
"""

GOLDEN = "user: Hi, where is my order ORD-1001?\nagent: Your parcel left the warehouse yesterday evening.\n"


def test_handoff_golden_and_a_packs_parts_on_one_turn_say_it_once(tmp_path: Path) -> None:
    with example_shop(tmp_path) as (shop, url):
        (shop / "said.tamesu.yaml").write_text(SUITE, encoding="utf-8")
        (shop / "golden").mkdir()
        (shop / "golden" / "first.txt").write_text(GOLDEN, encoding="utf-8")
        done = forked.run(["run", "said.tamesu.yaml", "--out", "out", "--report", "html,json"], shop,
                          {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": "off", "SHOP_URL": url}, 120)
    assert done.returncode == 1, done.stdout + done.stderr
    [run] = list((shop / "out").iterdir())
    [result] = (run).rglob("result.json")
    graded = {(a["name"], a["on_turn"]): a["reason"] for a in json.loads(result.read_text())["assertions"]}
    assert graded[("assert[0]/handoff", 2)] == 'expected no handoff; the agent handed over to "support"', graded
    assert graded[("assert[1]/handoff", 2)] == "expected a handoff within 1 turn(s)", graded
    assert re.fullmatch(r"the answer is only 0\.\d\d similar to golden file golden/first\.txt \(min 0\.8\): expected "
                        r'"Your parcel left the warehouse yesterday evening\.", found "Order ORD-1001 .*"',
                        graded[("golden", 1)]), graded
    # a part on a turn of its own is named with it, as an assertion written alone is
    assert graded[("assert[3]/pack mine", None)] == (
        "2 of 3 failed: not_regex (turn 2): expected no match for /colleague/; the answer has \"colleague\"; "
        "not_contains: expected the agent never to say \"colleague\"; turn 2 said: \"I'm passing you to a "
        "colleague from our support team.\""), graded
    # within a pack on one turn, `on_turn: last` and `on_turn: 2` are that turn, which the pack's label names; a
    # part on another turn is not graded on this one (it read no turn: `not_contains` passed)
    assert graded[("assert[4]/pack mine", 2)] == (
        "3 of 3 failed: not_regex: expected no match for /colleague/; the answer has \"colleague\"; not_contains: "
        "expected the agent never to say \"colleague\"; the answer said: \"I'm passing you to a colleague from our "
        "support team.\"; contains: turn 1 is not the pack's turn"), graded
    report = html.unescape(re.sub(r"<[^>]+>", " ", (run / "report.html").read_text()))
    for said in (done.stdout, json.dumps(list(graded.values())), report):
        assert "the agent handed over" in said, said
        assert not re.search(r"turn 2 handed|least similar: turn|it came at turn", said), said
    assert "✗ assert[0]/handoff (turn 2): expected no handoff; the agent handed over" in done.stdout, done.stdout
    assert "✗ assert[1]/handoff (turn 2): expected a handoff within 1 turn(s)\n" in done.stdout, done.stdout


def test_a_checkpoint_says_the_turn_it_was_reached_at_once(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    done = run_test(["-i", "tests/dynamic.jsonl", "-n", "expense", "-v", "--out", str(tmp_path / "out")],
                    env={**expense_agent.env, "TAMESU_STORE": "off"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert '✓ ask_type (turn 1) Agent asks for expense type: found "type" (the answer)\n' in done.stdout, \
        done.stdout
    [result] = (tmp_path / "out").rglob("result.json")
    reasons = [a["reason"] for a in json.loads(result.read_text())["assertions"] if a["name"] == "checkpoint ask_type"]
    assert reasons == ['reached at turn 1: found "type" (the answer)'], reasons
