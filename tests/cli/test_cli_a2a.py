"""The a2a target through the `tamesu` command, against the A2A test agents: a streamed conversation with a
skill, headers, metadata, a data step and a file step, and a push-notification test over gRPC."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sdk_groups import IN_PROCESS_A2A_SERVER

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

pytestmark = IN_PROCESS_A2A_SERVER  # serves A2A in this process: a2a-sdk's server side


SUITE = """\
targets:
  shop:
    type: a2a
    url: "{url}/a2a"
    headers: {{ Authorization: "Bearer {{{{secrets.SHOP_TOKEN}}}}" }}
    stream: true
    skill: order-status
    metadata: {{ tenant: acme }}
    turn_timeout: 10s
  shop-push: {{ type: a2a, url: "{grpc}", push: true, turn_timeout: 10s }}
tests:
  - name: order status
    target: shop
    scenario:
      script:
        - say: "order status please"
        - say: "ORD-1001"
        - say: "here is the receipt"
          data: {{ order: ORD-1001, reason: damaged }}
          files: [receipt.txt]
    assert:
      - contains: "Order ORD-1001 has shipped"
      - json_path: {{ path: "$.status.state", equals: completed }}
        on_turn: last
      - json_path:
          path: "$.artifacts[*].parts[?(@.kind == 'data')].data"
          equals: {{ order: ORD-1001, status: shipped }}
        on_turn: 2
      - json_path: {{ path: "$.artifacts[*].parts[?(@.kind == 'data')].data.files[*].name", equals: receipt.txt }}
        on_turn: last
      - metric: {{ name: a2a_tasks, lte: 2 }}
      - metric: {{ name: time_to_first_token_ms, lte: 5000 }}
  - name: push
    target: shop-push
    scenario: {{ script: [ {{ say: "early bird" }} ] }}
    assert:
      - json_path: {{ path: "$.status.state", equals: completed }}
        on_turn: last
      - json_path: {{ path: "$.artifacts[*].name", equals: result }}
      - metric: {{ name: a2a_pushes, gte: 1 }}
"""


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


def test_a2a_suite_through_the_command(tmp_path: Path, tamesu, agents: A2AAgents) -> None:
    from agents.a2a_agents import TOKEN

    (tmp_path / "receipt.txt").write_text("ORD-1001: 2 items")
    (tmp_path / "shop.yaml").write_text(SUITE.format(url=agents.urls["v03"], grpc=agents.grpc_url))
    result = tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path, env={"SHOP_TOKEN": TOKEN})
    assert result.returncode == 0, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    lines = {line["test"]: line for line in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {name: line["status"] for name, line in lines.items()} == {"order status": "passed", "push": "passed"}

    def detail(test: str) -> dict:
        return json.loads((run_dir / lines[test]["runs"][0]["dir"] / "result.json").read_text())

    streamed = detail("order status")
    last = streamed["turns"][-1]["agent"]
    assert last["response"]["status"]["state"] == "completed"
    assert [event["kind"] for event in last["raw"]][-1] == "status-update"  # every streamed event is kept
    received = last["response"]["artifacts"][0]["parts"][0]["data"]
    assert received["data"] == [{"order": "ORD-1001", "reason": "damaged"}]
    # the turn's W3C trace context rides along as message metadata, and the turn records its trace id
    traceparent = received["metadata"].pop("traceparent")
    assert traceparent == f"00-{last['trace_id']}-{traceparent.split('-')[2]}-01"
    assert received["metadata"] == {"tenant": "acme"} and received["version"] == "0.3"
    assert streamed["turns"][-1]["user"]["files"][0]["name"] == "receipt.txt"
    names = [event["name"] for event in streamed["events"]]
    assert {"card", "transport", "task_input_required", "task_completed"} <= set(names)
    transport = next(e for e in streamed["events"] if e["name"] == "transport")["data"]
    assert (transport["binding"], transport["protocol_version"], transport["mode"]) == ("jsonrpc", "0.3", "stream")
    assert streamed["metrics"]["a2a_tasks"] == 2 and streamed["metrics"]["a2a_skills"] == 2
    assert streamed["metrics"]["time_to_first_token_ms"] > 0
    assert TOKEN not in (run_dir / lines["order status"]["runs"][0]["dir"] / "result.json").read_text()

    pushed = detail("push")
    assert pushed["metrics"]["a2a_pushes"] >= 1
    assert "push_received" in {event["name"] for event in pushed["events"]}
    transport = next(e for e in pushed["events"] if e["name"] == "transport")["data"]
    assert (transport["binding"], transport["protocol_version"], transport["mode"]) == ("grpc", "1.0", "push")


HANDOFF_SUITE = """\
targets:
  desk:
    type: a2a
    url: "{url}/a2a"
    turn_timeout: 10s
    handoff: {{ regex: "(?i)echo: .*person", to: "$.artifacts[0].name" }}
tests:
  - name: handed over
    target: desk
    scenario: {{ script: [ {{ say: "hello" }}, {{ say: "a person please" }}, {{ say: "never sent" }} ] }}
    assert:
      - handoff: {{ within_turns: 2, to: "^echo$" }}
      - turns: {{ equals: 2 }}
  - name: expects none
    target: desk
    scenario: {{ script: [ {{ say: "a person please" }} ] }}
    assert: [ {{ handoff: false }} ]
"""


def test_an_a2a_targets_handoff_signal_is_read_and_ends_the_conversation(tmp_path: Path, tamesu,
                                                                          agents: A2AAgents) -> None:
    # the a2a target does not read `handoff:` itself: the engine reads it from each turn (it was ignored, so
    # `handoff: false` passed however the agent handed over)
    (tmp_path / "desk.yaml").write_text(HANDOFF_SUITE.format(url=agents.urls["v10"]))
    result = tamesu(["run", "desk.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    lines = {line["test"]: line for line in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {name: line["status"] for name, line in lines.items()} == {"handed over": "passed",
                                                                     "expects none": "failed"}
    handed = json.loads((run_dir / lines["handed over"]["runs"][0]["dir"] / "result.json").read_text())
    assert handed["end_reason"] == "handoff"
    assert [e["data"] for e in handed["events"] if e["name"] == "handoff"] == [{"to": "echo", "summary": None}]
    [failure] = lines["expects none"]["runs"][0]["failures"]
    assert failure["reason"] == 'expected no handoff; turn 1 handed over to "echo"'


SESSION_SUITE = """\
targets:
  desk:
    type: a2a
    url: "{url}/a2a"
    turn_timeout: 10s
    headers: {{ Authorization: "Bearer {{{{session.token}}}}" }}
    session:
      open: {{ url: "{tokens}/token", capture: {{ token: $.token }} }}
tests:
  - name: minted
    target: desk
    scenario: {{ script: [ {{ say: "who am I" }} ] }}
    assert:
      - json_path: {{ path: "$.artifacts[0].parts[0].data.auth", equals: "Bearer minted-42" }}
"""


def test_session_open_mints_a_token_for_an_a2a_target(tmp_path: Path, tamesu, agents: A2AAgents,
                                                       serve: Any) -> None:
    # session.open was rest's, voice's and pipecat's alone: on an a2a target it was warned as "a key of
    # pipecat targets" and ignored, and `{{session.token}}` made each run an error
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    minted: list[str] = []

    async def token(request: Request) -> JSONResponse:
        minted.append(request.method)
        return JSONResponse({"token": "minted-42"})

    tokens = serve(Starlette(routes=[Route("/token", token, methods=["POST"])]))
    (tmp_path / "desk.yaml").write_text(SESSION_SUITE.format(url=agents.urls["v10"], tokens=tokens.url))
    result = tamesu(["run", "desk.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "'session' is a key of" not in result.stderr and minted == ["POST"]
    [run_dir] = list((tmp_path / "out").iterdir())
    written = (run_dir / "desk" / "minted" / "run-1" / "result.json").read_text()
    # captured for a credential's header: masked as a secret in what the run writes
    assert "minted-42" not in written
    assert [e["data"]["captured"] for e in json.loads(written)["events"] if e["name"] == "session_open"] == [["token"]]


UNSEEN_TOOLS_SUITE = """\
targets:
  shop: {{ type: a2a, url: "{url}/a2a", turn_timeout: 10s }}
defaults: {{ assert: [ {{ tool_not_called: cancel_order }} ] }}
tests:
  - name: tools
    target: shop
    scenario: {{ script: [ {{ say: "order status please" }} ] }}
    assert:
      - tool_called: lookup_order
      - tool_not_called: refund
"""


def test_a_tool_assertion_an_a2a_agent_never_reports_is_an_error_of_the_suite(tmp_path: Path, tamesu,
                                                                               agents: A2AAgents) -> None:
    # validate warned that it "can never see" the tool, yet tool_called failed as the agent's fault (exit 1) and
    # tool_not_called passed unchecked: each run is the suite's error now, as the other unfit assertions are
    (tmp_path / "shop.yaml").write_text(UNSEEN_TOOLS_SUITE.format(url=agents.urls["v03"]))
    checked = tamesu(["validate", "shop.yaml"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert [line.split(": an A2A")[0] for line in checked.stderr.splitlines() if "every run of the test" in line] \
        == ["warning: shop.yaml:9:9: tests[0].assert[0]", "warning: shop.yaml:10:9: tests[0].assert[1]"]
    assert "warning: shop.yaml:3:42: defaults.assert[0].tool_not_called: an A2A agent reports no tool calls, so " \
           "this assertion can never see cancel_order" in checked.stderr, checked.stderr
    result = tamesu(["run", "shop.yaml", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    [line] = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    assert (line["status"], line["runs"][0]["fault"]) == ("error", "suite")
    detail = json.loads((run_dir / line["runs"][0]["dir"] / "result.json").read_text())
    assert len(detail["turns"]) == 1  # the agent was talked to: only the grading is refused
    assert {a["name"]: (a["passed"], a["reason"].split(" (")[0]) for a in detail["assertions"]} == {
        "tool_called": (False, "not decided: an A2A agent reports no tool calls, so this assertion can never see "
                               "lookup_order"),
        "tool_not_called": (False, "not decided: an A2A agent reports no tool calls, so this assertion can never "
                                   "see refund"),
        "defaults/tool_not_called": (False, "not decided: an A2A agent reports no tool calls, so this assertion can "
                                            "never see cancel_order")}


def test_a_jsonl_cases_tool_assertion_an_a2a_agent_never_reports_is_the_same_error(tmp_path: Path, tamesu,
                                                                                    agents: A2AAgents) -> None:
    # the JSONL path says and does what a suite's does: validate's warning says every run is an error, and it is
    (tmp_path / "tamesu.yaml").write_text(f"targets:\n  shop: {{ type: a2a, url: \"{agents.urls['v03']}/a2a\" }}\n")
    (tmp_path / "cases.jsonl").write_text(json.dumps({"id": "tools", "input": "order status please", "assertions": [
        {"type": "tool_called", "name": "lookup_order"}]}) + "\n")
    checked = tamesu(["validate", "cases.jsonl", "-n", "shop"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stderr.splitlines() == [
        "warning: cases.jsonl:1:64: assertions[0]: an A2A agent reports no tool calls, so this assertion can never "
        "see lookup_order (only the suite's remote agents, none declared, count as calls; with `traces:`, the agent's "
        "execute_tool spans do): every run of the test is an error"], checked.stderr
    result = tamesu(["test", "-i", "cases.jsonl", "-n", "shop", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    [path] = (tmp_path / "out").rglob("result.json")
    detail = json.loads(path.read_text())
    assert detail["fault"] == "suite", detail
    assert [a["reason"].split(" (")[0] for a in detail["assertions"]] == [
        "not decided: an A2A agent reports no tool calls, so this assertion can never see lookup_order"]
