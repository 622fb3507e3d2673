"""`{{captured.NAME}}` where a target reads it as it opens, before the first turn, can never have a value: the
suite's mistake, said where it is written (exit 2) for the built-in types' keys, and by the run (exit 2, not
the infrastructure's 3) where only the open finds it. Against the A2A test agents and a local REST agent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import run_tamesu
from sdk_groups import IN_PROCESS_A2A_SERVER

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

A2A_SUITE = """\
vars: {{ order_header: "order {{{{captured.order}}}}" }}
targets:
  shop:
    type: a2a
    url: "{url}/a2a"
    headers: {{ X-Order: "{{{{vars.order_header}}}}" }}
    metadata: {{ order: "{{{{captured.order}}}}" }}
    turn_timeout: 10s
tests:
  - name: order
    target: shop
    capture: [ {{ name: order, regex: "ORD-\\\\d+" }} ]
    scenario: {{ script: [ {{ say: "order status please" }}, {{ say: "{{{{captured.order}}}}" }} ] }}
"""


@pytest.fixture(scope="module")
def agents() -> Iterator[A2AAgents]:
    from agents.a2a_agents import A2AAgents  # here, not at collection: tests/sdk_groups.py

    with A2AAgents() as running:
        yield running


@IN_PROCESS_A2A_SERVER
def test_a_capture_in_what_an_a2a_target_reads_as_it_opens_is_refused_where_it_is(
        tmp_path: Path, agents: A2AAgents) -> None:
    # before: validated, then every run an error at open ("{{captured.order}} has no value"), exit 3
    (tmp_path / "s.yaml").write_text(A2A_SUITE.format(url=agents.urls["v10"]))
    done = run_tamesu(["run", "s.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert ("s.yaml:6:25: targets.shop.headers.X-Order: bad template {{vars.order_header}} (which holds "
            "{{captured.order}}): the target renders its headers as it opens, before the first turn, so nothing "
            "is captured yet") in lines, done.stderr
    assert ("s.yaml:7:24: targets.shop.metadata.order: bad template {{captured.order}}: the target renders its "
            "metadata as it opens, before the first turn, so nothing is captured yet") in lines, done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything ran
    # the script's second step reads what the first turn captured: that one is fine
    assert not any("script" in line for line in lines), done.stderr


def _agent(serve: Any) -> str:
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({"reply": f"Your order ORD-1001 ({body.get('order')})"})

    return str(serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url)


def _result(out: Path) -> dict[str, Any]:
    [run_dir] = list(out.iterdir())
    [line] = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    return json.loads((run_dir / line["runs"][0]["dir"] / "result.json").read_text())


def test_a_capture_in_a_rest_body_is_read_per_turn_but_not_on_the_first(tmp_path: Path, serve: Any) -> None:
    # a rest request's body is rendered each turn, after the captures of the turns before it: validate takes it;
    # on the first turn, before the agent said anything, it can have no value: the suite's error (was exit 3)
    url = _agent(serve)
    (tmp_path / "s.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat', response: {{ text: $.reply }},\n"
        "         request: { body: { message: '{{message}}', order: '{{captured.order}}' } } }\n"
        "tests:\n  - name: t\n    target: bot\n    capture: [ { name: order, regex: 'ORD-\\d+' } ]\n"
        "    scenario: { script: [ { say: hi }, { say: again } ] }\n", encoding="utf-8")
    assert run_tamesu(["validate", "s.yaml"], cwd=tmp_path).returncode == 0
    done = run_tamesu(["run", "s.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    result = _result(tmp_path / "out")
    assert (result["status"], result["fault"]) == ("error", "suite")
    assert result["error"] == ("turn 1: the request could not be written: {{captured.order}} has no value: "
                               "nothing is captured before the first turn"), result["error"]
    assert not result["turns"]


def test_a_capture_only_the_open_finds_is_the_suites_error(tmp_path: Path, serve: Any) -> None:
    # a model target's system_file is read as it opens (validate does not read its text): was exit 3, the
    # infrastructure's
    (tmp_path / "prompt.txt").write_text("You handle order {{captured.order}}.")
    (tmp_path / "s.yaml").write_text(
        "models:\n  bot: { provider: fake, rules: [ { say: 'Your order ORD-1001' } ] }\n"
        "targets:\n  desk: { type: model, model: bot, system_file: prompt.txt }\n"
        "tests:\n  - name: t\n    target: desk\n    capture: [ { name: order, regex: 'ORD-\\d+' } ]\n"
        "    scenario: { script: [ { say: hi } ] }\n", encoding="utf-8")
    done = run_tamesu(["run", "s.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    result = _result(tmp_path / "out")
    assert (result["status"], result["fault"]) == ("error", "suite")
    assert result["error"].endswith("{{captured.order}} has no value: the target renders it as it opens, before "
                                    "the first turn, so nothing is captured yet"), result["error"]
    assert "agent_error" not in {event["name"] for event in result["events"]}
