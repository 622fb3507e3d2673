"""A capture no agent turn had is said in the result (a `capture_not_found` event naming what looked where) and
counted on the console's `along the way` line. Before, it left no trace: only a later template or assertion that
happened to read it said anything, and a capture nothing read vanished from a green run. Its pattern is written
/…/ as the checks' reasons write one (before, a Python repr doubled its backslash: 'via ([A-Z]+)\\\\b')."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from example_shop import example_shop

_SUITE = """\
models:
  bot: { provider: fake, rules: [ { say: "Your order ORD-1001 is on its way" } ] }
targets:
  bot: { type: model, model: bot }
tests:
  - name: order
    target: bot
    capture:
      - { name: order, regex: "ORD-[0-9]+" }
      - { name: carrier, regex: 'via ([A-Z]+)\\b' }
      - { name: eta, json_path: "$.eta" }
    scenario: { script: [ { say: "where is my order?" }, { say: "and when?" } ] }
    assert: [ { captured: { name: order, matches: "^ORD-" } } ]
"""


def test_a_capture_no_turn_had_is_an_event_and_counted_along_the_way(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "along the way: 2 captures found in no agent turn (capture_not_found, 1 test)" in done.stdout, done.stdout
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "order" / "run-1" / "result.json").read_text())
    assert result["captured"] == {"order": "ORD-1001"}
    assert [e["data"] for e in result["events"] if e["name"] == "capture_not_found"] == [
        {"name": "carrier", "note": "capture carrier: regex /via ([A-Z]+)\\b/ found nothing in 2 agent turn(s)"},
        {"name": "eta", "note": "capture eta: json_path $.eta found nothing in 2 agent turn(s)"},
    ]


def test_a_step_that_needs_a_capture_no_turn_had_says_what_the_capture_looked_for(tmp_path: Path,
                                                                                   tamesu: Any) -> None:
    # before: "the next user turn could not be written: {{captured.order}} has no value", fault agent: whether the
    # agent never gave an order number or the capture looks for the wrong thing was left to the run's events
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace(
        '{ say: "and when?" }', '{ say: "and when does {{captured.carrier}} bring it?" }'))
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("✗ conversation: the next user turn could not be written: {{captured.carrier}} has no value (capture "
            "carrier: regex /via ([A-Z]+)\\b/ found nothing in 1 agent turn(s))") in done.stdout, done.stdout
    assert "fault: agent" in done.stdout


def test_an_assertion_that_needs_a_capture_no_turn_had_says_what_the_capture_looked_for(tmp_path: Path,
                                                                                        tamesu: Any) -> None:
    # before: "contains: cannot check: {{captured.carrier}} has no value" alone
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace(
        'assert: [ { captured: { name: order, matches: "^ORD-" } } ]',
        'assert: [ { contains: "{{captured.carrier}}" }, { contains: "{{captured.order}}" } ]'))
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "order" / "run-1" / "result.json").read_text())
    first = result["assertions"][0]
    assert (first["passed"], first["reason"]) == (
        False, "cannot check: {{captured.carrier}} has no value (capture carrier: regex /via ([A-Z]+)\\b/ found "
               "nothing in 2 agent turn(s))")
    assert result["assertions"][1]["passed"] is True


def test_a_captured_assertion_on_a_capture_no_turn_had_says_what_the_capture_looked_for(tmp_path: Path,
                                                                                        tamesu: Any) -> None:
    # before: "expected a value captured as carrier, found none (captured: order)": the one assertion that is
    # about the capture said least of what it looked for
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.replace(
        'assert: [ { captured: { name: order, matches: "^ORD-" } } ]', 'assert: [ { captured: carrier } ]'))
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("✗ captured: expected a value captured as carrier, found none (capture carrier: regex /via ([A-Z]+)\\b/ "
            "found nothing in 2 agent turn(s))") in done.stdout, done.stdout


def test_an_after_each_hook_that_needs_a_capture_no_turn_had_says_what_the_capture_looked_for(
        tmp_path: Path, tamesu: Any) -> None:
    # before: "after_each hook 1: {{captured.carrier}} has no value" alone: the capture_not_found event was made
    # after the hooks had run
    (tmp_path / "s.tamesu.yaml").write_text(
        'hooks: { after_each: [ "echo {{captured.order}} {{captured.carrier}}" ] }\n' + _SUITE)
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("warning: s/order: after_each hook 1: {{captured.carrier}} has no value (capture carrier: regex "
            "/via ([A-Z]+)\\b/ found nothing in 2 agent turn(s))") in done.stdout + done.stderr, done.stdout


_SHOP = """\
targets:
  shop:
    type: rest
    url: "{{env.SHOP_URL}}/chat"
    request: { body: { message: "{{message}}", session_id: "{{session}}" } }
    response: { text: $.reply }
tests:
  - name: delivered
    target: shop
    capture:
      - { name: eta, json_path: "$.order.eta" }
      - { name: carrier, json_path: "$.order.carrier" }
    scenario: { script: [ { say: "Hi, where is my order ORD-1002?" }, { say: "Thanks, bye" } ] }
    assert: [ { captured: eta }, { captured: { name: eta, exists: false } } ]
"""


def test_a_json_path_that_finds_null_says_it_found_null_not_nothing(tmp_path: Path, tamesu: Any) -> None:
    # before: "json_path $.order.eta found nothing in 2 agent turn(s)" for the delivered order's `"eta": null`: a
    # path looking in the wrong place and an agent saying "no value" read the same. A null is no captured value
    # (`captured: {name: eta, exists: false}` passes), as `equals: null` already says.
    (tmp_path / "s.tamesu.yaml").write_text(_SHOP)
    with example_shop(tmp_path / "agent") as (_, url):
        done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"SHOP_URL": url})
    assert done.returncode == 1, done.stdout + done.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "delivered" / "run-1" / "result.json").read_text())
    null = "capture eta: json_path $.order.eta found null in 1 of 2 agent turn(s) and nothing in the others " \
           "(a null is no captured value)"
    assert [e["data"] for e in result["events"] if e["name"] == "capture_not_found"] == [
        {"name": "eta", "note": null},
        {"name": "carrier", "note": "capture carrier: json_path $.order.carrier found nothing in 2 agent turn(s)"},
    ]
    assert [(a["passed"], a["reason"]) for a in result["assertions"]] == [
        (False, f"expected a value captured as eta, found none ({null})"),
        (True, "nothing captured as eta, as expected"),
    ]
