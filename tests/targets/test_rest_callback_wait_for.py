"""`wait_for` on a rest target whose agent answers by calling back (`response.listen`, as Slack or Telegram bots do)
hears what the agent posts after a turn's answer ended: a turn without a user turn; a phrase never posted fails in
one line naming what the agent did post. Through `tamesu run`, against the local callback agent
(`agents.rest_agents`, `POST /bot`: "Working on: X", then "Done: X" a moment later)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.fixtures import RunningAgents, rest_agents

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest

SUITE = """\
targets:
  bot:
    type: rest
    url: "{url}/bot"
    turn_timeout: 10s
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    # the turn ends at the agent's first post: its "Done: ..." comes unasked, after it
    response: {{ listen: {{ path: /hook, idle: 1s, done: {{ path: $.text, equals: "Working on: order pizza" }} }} }}
tests:
  - name: heard
    target: bot
    scenario: {{ script: [ {{ say: order pizza }}, {{ wait_for: "Done: order pizza", timeout: 10s }} ] }}
    assert: [ {{ contains: "Done: order pizza" }} ]
  - name: never posted
    target: bot
    scenario: {{ script: [ {{ say: order pizza }}, {{ wait_for: "refund", timeout: 2s }} ] }}
"""


def test_wait_for_hears_what_a_callback_agent_posts_after_its_answer(tamesu: Callable, tmp_path: Path,
                                                                     rest_agents: RunningAgents) -> None:
    # before: the wait ended at once ("the agent said nothing") and the later post was an `unsolicited` event
    (tmp_path / "bot.tamesu.yaml").write_text(SUITE.format(url=rest_agents.url), encoding="utf-8")
    done = tamesu(["run", "bot.tamesu.yaml", "--out", "out", "--parallel", "2"], cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr
    results: dict[str, dict[str, Any]] = {
        (r := json.loads(p.read_text()))["test"]: r for p in (tmp_path / "out").rglob("result.json")}
    heard = results["heard"]
    assert heard["status"] == "passed", done.stdout
    turns = [(None if t["user"] is None else t["user"]["text"], t["agent"]["text"]) for t in heard["turns"]]
    assert turns == [("order pizza", "Working on: order pizza"), (None, "Done: order pizza")], turns
    second = heard["turns"][1]["agent"]
    assert second["raw"] == [{"text": "Done: order pizza"}] and second["status"] is None
    assert second["sent_at_ms"] <= second["first_token_at_ms"] <= second["completed_at_ms"]
    never = results["never posted"]
    assert never["status"] == "failed" and done.returncode == 1, done.stdout
    reason = next(a["reason"] for a in never["assertions"] if not a["passed"])
    assert reason.startswith('script step 2 waited 2s for "refund"; the agent said "'), reason
    assert "Done: order pizza" in reason and "\n" not in reason, reason
