"""A dynamic case's checkpoints over the agent's own spans (`traces:` in tamesu.yaml): each is checked after every
turn, once that turn's spans came, as the end of the run waits for them (`traces.wait`)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.expense_agent import run_test
from agents.traced import TracedRestAgent, free_port
from ports import refused_port


@pytest.fixture
def traced(serve: Callable[[Any], Any]) -> Iterator[Callable[..., str]]:
    """`traced(tmp_path, wait, **agent options)`: a traced agent and the receiver it exports to, in a project of
    tmp_path with a dynamic case whose first turn looks an order up (a call only its spans show)."""
    made: list[TracedRestAgent] = []

    def start(tmp_path: Path, wait: str, **options: Any) -> str:
        receive = f"127.0.0.1:{free_port()}"
        agent = TracedRestAgent(f"http://{receive}", **options)
        made.append(agent)
        url = serve(agent.app()).url
        (tmp_path / "tamesu.yaml").write_text(textwrap.dedent(f"""\
            targets:
              shop: {{ type: rest, url: "{url}/chat", request: {{ body: {{ message: "{{{{message}}}}" }} }} }}
            traces: {{ receive: "{receive}", wait: {wait} }}
            """))
        (tmp_path / "sims.py").write_text("def on(inputs):\n    return 'and then?'\n")
        case = {"id": "traced", "input": "Where is ORD-1001?", "simulator": {"use": "scripts:sims:on"},
                "max_turns": 2,
                "checkpoints": [{"id": "looked", "assertion": {"type": "tool_called", "name": "lookup_order"}}]}
        (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
        out = tmp_path / "records.jsonl"
        done = run_test(["-i", "cases.jsonl", "-n", "shop", "-o", str(out), "--out", str(tmp_path / "runs")],
                        cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return out.read_text()

    yield start
    for agent in made:
        agent.shutdown()


def test_a_checkpoint_over_spans_sees_its_turns_spans(tmp_path: Path, traced: Callable[..., str]) -> None:
    # before: checked after each turn on no spans at all (the tool call is only in the agent's spans), so never
    # reached, and the turn was not checked again at the end: the case talked on to max_turns and failed
    # "missing checkpoints: looked" though its first turn looked the order up. Its spans come 300 ms late
    (record,) = [json.loads(line) for line in traced(tmp_path, "3s", batch_delay_ms=300).splitlines()]
    assert record["total_turns"] == 1, record  # reached at turn 1: the simulator was not asked for more
    (checkpoint,) = record["checkpoints"]
    assert checkpoint["reached_at_turn"] == 1 and checkpoint["passed"] is True, checkpoint
    assert "from the agent's spans" in checkpoint["reason"], checkpoint


def test_a_turns_spans_that_came_after_its_wait_are_read_at_the_next_check(tmp_path: Path,
                                                                           traced: Callable[..., str]) -> None:
    # the first turn's spans are held until the second request (past the 500 ms its check waited): the
    # conversation went on, and the check after turn 2, with those spans come, finds the checkpoint reached at
    # turn 1 (checked only on the new turn, the case talked on to max_turns and failed, the call in its spans)
    (record,) = [json.loads(line) for line in traced(tmp_path, "500ms", release_at_request=2).splitlines()]
    assert record["total_turns"] == 2, record
    (checkpoint,) = record["checkpoints"]
    assert checkpoint["reached_at_turn"] == 1 and checkpoint["passed"] is True, checkpoint


def test_a_checkpoint_over_spans_that_never_came_is_not_decided(tmp_path: Path, serve: Callable[[Any], Any]) -> None:
    # the agent exports elsewhere: no span of any turn comes. Before: checked after each turn on no spans, the
    # checkpoint was never checked again once the run said its traces never came, and the case failed (exit 1,
    # the agent's failure) for a call its first turn did make
    agent = TracedRestAgent(f"http://127.0.0.1:{refused_port()}", encoding="json")  # fails at once, no retries
    try:
        url = serve(agent.app()).url
        (tmp_path / "tamesu.yaml").write_text(textwrap.dedent(f"""\
            targets:
              shop: {{ type: rest, url: "{url}/chat", request: {{ body: {{ message: "{{{{message}}}}" }} }} }}
            traces: {{ receive: "127.0.0.1:{free_port()}", wait: 300ms }}
            """))
        (tmp_path / "sims.py").write_text("def on(inputs):\n    return 'and then?'\n")
        case = {"id": "traced", "input": "Where is ORD-1001?", "simulator": {"use": "scripts:sims:on"},
                "max_turns": 2,
                "checkpoints": [{"id": "looked", "assertion": {"type": "tool_called", "name": "lookup_order"}}]}
        (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
        out = tmp_path / "records.jsonl"
        done = run_test(["-i", "cases.jsonl", "-n", "shop", "-o", str(out), "--out", str(tmp_path / "runs")],
                        cwd=tmp_path)
    finally:
        agent.shutdown()
    assert done.returncode == 3, done.stdout + done.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["status"] == "error" and record["fault"] == "environment", record
    (checkpoint,) = record["checkpoints"]
    assert checkpoint["passed"] is False and checkpoint["reason"].startswith("not decided: "), checkpoint
    assert "trace_not_found" in checkpoint["reason"], checkpoint
