"""An orchestrator behind an mcp target that delegates to the suite's remote agents, as the A2A page's example
has it: `env: { BILLING_AGENT_URL: "{{remote.billing.url}}" }`, and `fuzz_tools: { billing: error }` making
billing fail. The server is a real stdio MCP server whose tool sends billing an A2A `message/send`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SERVER = """\
import json, os, uuid
import httpx
from mcp.server.mcpserver import MCPServer

server = MCPServer("orchestrator")


@server.tool()
def ask_billing(message: str) -> str:
    \"\"\"Ask the billing agent.\"\"\"
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "kind": "message", "messageId": str(uuid.uuid4()),
        "parts": [{"kind": "text", "text": message}]}}}
    task = httpx.post(os.environ["BILLING_AGENT_URL"], json=body, timeout=10).json()["result"]
    return json.dumps({"state": task["status"]["state"], "artifacts": task.get("artifacts", [])})


server.run()
"""

SUITE = """\
models:
  judge: { provider: fake, rules: [ { pass: true, reason: fine } ] }
  target:
    provider: fake
    rules:
      - { when: "(?i)refund", tool_calls: [ { name: ask_billing, args: { message: "Refund ORD-1001" } } ],
          say: "I asked billing" }
remote_agents:
  billing:
    skills: [refund]
    replies:
      - { when: "(?i)refund", say: "Refund issued, reference RF-889" }
targets:
  orchestrator:
    type: mcp
    command: PYTHON
    args: [server.py]
    env: { BILLING_AGENT_URL: "{{remote.billing.url}}" }
    connect: { timeout: 60s }  # the server imports the MCP SDK: 10 s ran out for others on a loaded machine
tests:
  - name: billing answers
    target: orchestrator
    scenario: { script: [ { say: "A refund for ORD-1001, please" } ] }
    assert:
      - delegated_to: { agent: billing, contains: "ORD-1001" }
  - name: billing is down
    target: orchestrator
    fuzz_tools: { billing: error }
    scenario: { script: [ { say: "A refund for ORD-1001, please" } ] }
    assert:
      - delegated_to: billing
"""


def _result(run_dir: Path, test: str) -> dict[str, Any]:
    found = sorted(run_dir.glob(f"*/suite/{test}/run-1/result.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def test_fuzz_tools_naming_a_remote_agent_behind_an_mcp_target_fails_that_agent(tmp_path: Path, tamesu: Any) -> None:
    # before: "mcp target orchestrator: fuzz_tools names 'billing', which the server does not offer (its tools:
    # ask_billing)", an infrastructure error (exit 3): only the a2a target let a test fuzz a remote agent
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "suite.yaml").write_text(SUITE.replace("PYTHON", sys.executable))
    done = tamesu(["run", "suite.yaml", "--out", "runs"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    answered, down = _result(tmp_path / "runs", "billing-answers"), _result(tmp_path / "runs", "billing-is-down")
    tool_result = next(call["result"] for call in answered["tool_calls"] if call["name"] == "ask_billing")
    assert tool_result["state"] == "completed"  # the server's JSON text, read as JSON
    assert "RF-889" in json.dumps(tool_result)
    assert down["status"] == "passed"
    fuzzed = next(call["result"] for call in down["tool_calls"] if call["name"] == "ask_billing")
    assert fuzzed["state"] == "failed" and "RF-889" not in json.dumps(fuzzed)
    assert [event["data"] for event in down["events"] if event["name"] == "tool_fuzzed"] == [
        {"tool": "billing", "mode": "error"}]


def test_a_tool_assertion_naming_no_tool_of_the_server_is_the_suites_error(tmp_path: Path, tamesu: Any) -> None:
    # before: `tool_not_called: ask_biling` passed every run, checking nothing, and `tool_called: ask_biling` failed
    # as the agent's fault; the server had said its tools (ask_billing) before the first turn
    asserts = ("      - tool_called: billing\n"           # a remote agent: its delegations are calls
               "      - tool_sequence: [ask_billing, billing]\n")
    suite = SUITE.replace("PYTHON", sys.executable).split("  - name: billing is down")[0]
    (tmp_path / "server.py").write_text(SERVER)
    delegated = 'delegated_to: { agent: billing, contains: "ORD-1001" }'
    (tmp_path / "ok.yaml").write_text(suite.replace(f"      - {delegated}\n", asserts))
    (tmp_path / "misspelt.yaml").write_text(suite.replace(delegated, "tool_not_called: ask_biling"))
    done = tamesu(["run", "ok.yaml", "misspelt.yaml", "--out", "runs"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    [ok], [result] = ([json.loads(p.read_text()) for p in (tmp_path / "runs").glob(f"*/{suite}/*/run-1/result.json")]
                      for suite in ("ok", "misspelt"))
    assert ok["status"] == "passed", ok["assertions"]
    assert (result["status"], result["fault"]) == ("error", "suite")
    said = ("tool_not_called: the MCP server offers no tool 'ask_biling' (its tools: ask_billing), nor was one called "
            "by that name: misspelt?")
    assert result["error"] == said
    assert done.stdout.count(said) == 1 and "Traceback" not in done.stdout + done.stderr
