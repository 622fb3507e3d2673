"""`wait_for` on a rest `streaming: websocket` target hears what the agent sends unasked: a greeting sent as the
socket opens (queued before the wait began) and words sent after a turn's answer, each a turn without a user
turn; a phrase never said fails in one line naming what the agent did say. Through `tamesu run`, against the
local websocket agent (`agents.rest_agents`, `WS /ws`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.fixtures import RunningAgents, rest_agents
from sessions import events
from tamesu.conversation import TurnError, UserTurn
from targets.test_rest_target import make_session, opened

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest

SUITE = """\
targets:
  greeter: {{ type: rest, url: "{ws}?greet=1", streaming: websocket, turn_timeout: 10s }}
  plain: {{ type: rest, url: "{ws}", streaming: websocket, turn_timeout: 10s }}
tests:
  - name: greeting
    target: greeter
    scenario: {{ script: [ {{ wait_for: welcome, timeout: 10s }}, {{ say: hi }} ] }}
    assert: [ {{ contains: "You said hi" }} ]
  - name: after a turn
    target: plain
    scenario: {{ script: [ {{ say: remind }}, {{ wait_for: "still there", timeout: 10s }}, {{ say: ok }} ] }}
    assert: [ {{ contains: "You said ok" }} ]
  - name: never said
    target: greeter
    scenario: {{ script: [ {{ wait_for: "goodbye forever", timeout: 2s }} ] }}
"""


def _results(out: Path) -> dict[str, dict[str, Any]]:
    return {(r := json.loads(p.read_text()))["test"]: r for p in out.rglob("result.json")}


def _failure(result: dict[str, Any]) -> str:
    return next(a["reason"] for a in result["assertions"] if not a["passed"])


def _turns(result: dict[str, Any]) -> list[tuple[str | None, str]]:
    """Each turn as (what the user said, or None for a turn the agent took unasked; what the agent said)."""
    return [(None if t["user"] is None else t["user"]["text"], t["agent"]["text"]) for t in result["turns"]]


def test_wait_for_hears_what_a_websocket_agent_sends_unasked(tamesu: Callable, tmp_path: Path,
                                                             rest_agents: RunningAgents) -> None:
    (tmp_path / "ws.tamesu.yaml").write_text(SUITE.format(ws=rest_agents.ws_url), encoding="utf-8")
    done = tamesu(["run", "ws.tamesu.yaml", "--out", "out", "--parallel", "3"], cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr
    results = _results(tmp_path / "out")
    assert set(results) == {"greeting", "after a turn", "never said"}, done.stdout + done.stderr

    greeting = results["greeting"]
    assert greeting["status"] == "passed", done.stdout
    # the greeting came before the wait began (as the socket opened): it is turn 1, no longer an `unsolicited` event
    assert _turns(greeting) == [(None, "Welcome!"), ("hi", "You said hi")]
    names = [e["name"] for e in greeting["events"]]
    assert "unsolicited" not in names, greeting["events"]
    heard = [e["data"] for e in greeting["events"] if e["name"] == "user_side" and e["data"].get("heard")]
    assert heard == [{"wait_for": "welcome", "step": 1, "heard": "turn 1 said it"}], greeting["events"]
    first = greeting["turns"][0]["agent"]
    assert first["raw"] == [{"text": "Welcome!"}]
    assert first["sent_at_ms"] <= first["first_token_at_ms"] <= first["completed_at_ms"]

    later = results["after a turn"]
    assert later["status"] == "passed", done.stdout
    assert _turns(later) == [("remind", "You said remind"), (None, "Still there?"), ("ok", "You said ok")]

    never = results["never said"]
    assert never["status"] == "failed"
    reason = _failure(never)
    assert reason == 'script step 1 waited 2s for "goodbye forever"; the agent said "Welcome!"', reason
    assert reason in done.stdout  # the console's one line
    assert done.returncode == 1, done.stdout + done.stderr


async def test_listen_takes_the_queued_greeting_waits_its_timeout_and_says_a_closed_socket(
        rest_agents: RunningAgents, tmp_path: Path) -> None:
    session = make_session(tmp_path)
    async with opened({"url": rest_agents.ws_url + "?greet=1", "streaming": "websocket"}, session) as target:
        greeting = await target.listen(10)
        assert greeting is not None and greeting.text == "Welcome!" and not greeting.ended
        started = time.monotonic()
        assert await target.listen(0.3) is None  # nothing more said: the wait's own timeout, then nothing
        assert time.monotonic() - started >= 0.3
        assert (await target.send(UserTurn(text="hi"))).text == "You said hi"
        with pytest.raises(TurnError, match="closed the websocket"):
            await target.send(UserTurn(text="close"))
        with pytest.raises(TurnError, match=r"closed the websocket \(code 1011"):
            await target.listen(5)
    assert events(session, "unsolicited") == []  # the greeting was heard as a turn, not set aside
