"""The orchestrator example (examples/orchestrator): its suite passes offline with the fake models.

The orchestrator runs as a user runs it (`python examples/orchestrator/agent.py --port 0`), as a fork of the warm
process (`forked.script_command`: a fresh interpreter spent 0.8 s of CPU importing a2a-sdk's server side, which
the warm process has imported); tamesu plays its billing and shipping agents (`remote_agents:`) for every run,
including the run where billing is down.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import forked
from lifeline import tied

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "orchestrator"


@pytest.fixture(scope="module")
def orchestrator() -> Iterator[str]:
    process = subprocess.Popen(tied(forked.script_command(EXAMPLE / "agent.py", "--port", "0")), cwd=EXAMPLE,
                               stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "SHIPPING_AGENT_TOKEN": "demo-shipping-token"})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "orchestrator listening on URL"
        assert "listening on" in line, line
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _results(out: Path) -> dict[str, dict[str, Any]]:
    lines = next(out.glob("*/results.jsonl")).read_text().splitlines()
    return {r["test"]: r for r in map(json.loads, lines)}


def _run_result(out: Path, test: str) -> dict[str, Any]:
    return json.loads(next(out.glob(f"*/*/{test}/run-1/result.json")).read_text())


def test_the_suite_passes_offline(orchestrator: str, tamesu: Callable[..., Any], tmp_path: Path) -> None:
    env = {**os.environ, "ORCHESTRATOR_URL": orchestrator, "TAMESU_STORE": str(tmp_path / "store.db")}
    done = tamesu(["run", "--out", str(tmp_path)], cwd=EXAMPLE, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    results = _results(tmp_path)
    assert {name: r["status"] for name, r in results.items()} == {
        "refund goes to billing": "passed", "tracking goes to shipping, with its token": "passed",
        "billing is down": "passed"}

    refund = _run_result(tmp_path, "refund-goes-to-billing")
    delegations = [c for c in refund["tool_calls"] if c["kind"] == "delegation"]
    assert delegations and delegations[0]["name"] == "billing"
    assert "ORD-1001" in delegations[0]["args"]["message"]
    assert delegations[0]["result"]["data"] == {"reference": "RF-889"}
    assert refund["metrics"]["delegations"] == len(delegations)
    delegated = [e for e in refund["events"] if e["name"] == "delegated"]
    assert delegated[0]["data"]["binding"] == "jsonrpc" and delegated[0]["data"]["version"] == "1.0"

    down = _run_result(tmp_path, "billing-is-down")
    fuzzed = [e["data"] for e in down["events"] if e["name"] == "delegated"]
    assert fuzzed and fuzzed[0]["state"] == "failed" and fuzzed[0]["fuzzed"] == "error"
    assert "unavailable" in down["turns"][0]["agent"]["text"]


def test_coverage_lists_a_declared_remote_agent_nobody_called(orchestrator: str, tamesu: Callable[..., Any],
                                                              tmp_path: Path) -> None:
    env = {**os.environ, "ORCHESTRATOR_URL": orchestrator, "TAMESU_STORE": str(tmp_path / "store.db")}
    done = tamesu(["run", "--out", str(tmp_path), "--filter", "tracking"], cwd=EXAMPLE, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = tamesu(["coverage", str(next(tmp_path.glob("2*"))), "--json"], cwd=EXAMPLE)
    assert report.returncode == 0, report.stdout + report.stderr
    remote = next(s for s in json.loads(report.stdout)["sections"] if s["kind"] == "remote_agents")
    assert {i["name"]: (i["offered"], i["uses"]) for i in remote["items"]} == {"billing": (True, 0),
                                                                              "shipping": (True, 1)}


def test_a_delegation_refused_for_its_token_is_said_in_the_failure(tamesu: Callable[..., Any], tmp_path: Path) -> None:
    # the orchestrator started without SHIPPING_AGENT_TOKEN: before, "no delegation to shipping; delegated to: none"
    process = subprocess.Popen(tied(forked.script_command(EXAMPLE / "agent.py", "--port", "0")), cwd=EXAMPLE,
                               stdout=subprocess.PIPE, text=True,
                               env={k: v for k, v in os.environ.items() if k != "SHIPPING_AGENT_TOKEN"})
    try:
        assert process.stdout is not None
        url = process.stdout.readline().rsplit(" ", 1)[-1].strip()
        done = tamesu(["run", "--out", str(tmp_path), "--filter", "shipping"], cwd=EXAMPLE,
                      env={**os.environ, "ORCHESTRATOR_URL": url, "TAMESU_STORE": str(tmp_path / "store.db")})
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("no delegation to shipping (1 message to it refused: no valid bearer token); delegated to: none"
            in done.stdout), done.stdout
