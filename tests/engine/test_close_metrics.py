"""A target's metrics are read once it is closed: what closing sends (an a2a task waiting for input cancelled)
is counted with the rest, against the A2A test agents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sdk_groups import IN_PROCESS_A2A_SERVER

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

pytestmark = IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side

SUITE = """\
targets:
  shop: {{ type: a2a, url: "{url}/rest", transport: http, turn_timeout: 10s }}
tests:
  - name: left waiting
    target: shop
    scenario: {{ script: [ {{ say: "order something" }} ] }}
    assert:
      - metric: {{ name: a2a_requests, equals: 2 }}
"""


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


def test_the_cancel_sent_at_close_is_one_of_the_requests(tmp_path: Path, tamesu, agents: A2AAgents) -> None:
    # before: the metrics were taken before the target closed, so the tasks/cancel of the task left in
    # input-required was on the timeline (task_canceled) but not in a2a_requests (1: the send alone)
    (tmp_path / "shop.yaml").write_text(SUITE.format(url=agents.urls["v10"]))
    result = tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path)
    [run_dir] = list((tmp_path / "out").iterdir())
    [line] = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    detail = json.loads((run_dir / line["runs"][0]["dir"] / "result.json").read_text())
    task_id = detail["turns"][0]["agent"]["response"]["id"]
    assert task_id in agents.canceled
    assert [e["data"]["task_id"] for e in detail["events"] if e["name"] == "task_canceled"] == [task_id]
    assert detail["metrics"]["a2a_requests"] == 2, detail["metrics"]  # the message/send and the tasks/cancel
    assert result.returncode == 0, result.stdout + result.stderr


ERROR_SUITE = """\
models:
  extract: {{ provider: fake, rules: [{{ when: "never said", say: "x" }}] }}
targets:
  shop: {{ type: a2a, url: "{url}/rest", transport: http, turn_timeout: 10s }}
tests:
  - name: cut short
    target: shop
    scenario: {{ script: [ {{ say: "order something" }}, {{ say: "ORD-1" }} ] }}
    capture: [ {{ name: question, extract: "the question the agent asked" }} ]
"""


def test_a_run_an_error_ended_keeps_what_the_closed_target_counted(tmp_path: Path, tamesu, agents: A2AAgents) -> None:
    # before: the extract model failing after turn 1 made the run an error whose result.json had the task_canceled
    # event and no a2a metric at all (a deadline kept them; an error dropped them)
    (tmp_path / "shop.yaml").write_text(ERROR_SUITE.format(url=agents.urls["v10"]))
    result = tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    [line] = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    detail = json.loads((run_dir / line["runs"][0]["dir"] / "result.json").read_text())
    assert detail["status"] == "error" and "fake extract: no rule matches" in detail["error"], detail["error"]
    task_id = detail["turns"][0]["agent"]["response"]["id"]
    assert [e["data"]["task_id"] for e in detail["events"] if e["name"] == "task_canceled"] == [task_id]
    metrics = detail["metrics"]
    assert (metrics.get("a2a_requests"), metrics.get("a2a_tasks")) == (2, 1), metrics  # the send and the cancel


async def test_a_live_session_checked_after_close_counts_the_cancel(tmp_path: Path, agents: A2AAgents) -> None:
    # the Python API grades the conversation so far: before close, the send alone; after it, the cancel too
    from tamesu.testing import AsyncAgentSession

    (tmp_path / "tamesu.yaml").write_text(
        f'targets:\n  shop: {{ type: a2a, url: "{agents.urls["v10"]}/rest", transport: http, turn_timeout: 10s }}\n')
    session = await AsyncAgentSession.open("shop", project=tmp_path)
    try:
        reply = await session.send("order something")
        assert reply.awaiting is not None and reply.awaiting.awaiting  # the task waits in input-required
        await session.expect(None, metric={"name": "a2a_requests", "equals": 1})
    finally:
        await session.close()
    await session.expect(None, metric={"name": "a2a_requests", "equals": 2})
