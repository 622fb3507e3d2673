"""`tamesu doctor` of a2a targets reads the agent card as a run reads it (over HTTP, or with gRPC's card calls) and
checks the binding a run would speak, against a2a-sdk's own servers (tests/agents/a2a_agents.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ports import refused_port
from sdk_groups import IN_PROCESS_A2A_SERVER
from targets.test_a2a_target import agents

if TYPE_CHECKING:
    from agents.a2a_agents import A2AAgents

pytestmark = IN_PROCESS_A2A_SERVER

__all__ = ["agents"]  # a fixture, imported to be found by pytest


def test_doctor_reads_an_a2a_agents_card_and_checks_the_binding_a_run_would_speak(
        agents: A2AAgents, tmp_path: Path, tamesu: Any) -> None:
    # before: a grpc:// url was a gRPC channel and its health service, an http one a TCP connect ("reachable
    # (TCP)"): the card a run reads first was never asked for, nor the gRPC interface it names
    grpc_interface = f"127.0.0.1:{agents.grpc_port}"
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  over_grpc: {{ type: a2a, url: '{agents.grpc_url}' }}
  card_then_grpc: {{ type: a2a, url: '{agents.urls["v10"]}/a2a', transport: grpc }}
  no_card: {{ type: a2a, url: '{agents.urls["nocard"]}/a2a' }}
tests: [ {{ name: t, target: over_grpc, scenario: {{ script: [ {{ say: hi }} ] }} }} ]
""")
    result = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    said = result.stdout
    assert result.returncode == 0, said + result.stderr
    assert (f"ok    target over_grpc (a2a) at {agents.grpc_url}: agent card Test Shop read at {agents.grpc_url} "
            f"(GetExtendedAgentCard, A2A 1.0); a run speaks GRPC 1.0 at {grpc_interface}: gRPC channel ready (TCP, "
            "HTTP/2)") in said, said
    v10 = agents.urls["v10"]
    assert (f"ok    target card_then_grpc (a2a) at {v10}/a2a: agent card Test Shop read at "
            f"{v10}/.well-known/agent-card.json; a run speaks GRPC 1.0 at {grpc_interface}: gRPC channel ready "
            "(TCP, HTTP/2)") in said, said
    nocard = agents.urls["nocard"]
    assert (f"warn  target no_card (a2a) at {nocard}/a2a: no agent card ({nocard}/.well-known/agent-card.json: "
            "HTTP 404; ") in said, said
    assert (f"a run assumes the agent does what the target asks; a run speaks JSONRPC 1.0 at {nocard}/a2a (not "
            "called: doctor sends the agent no message)\n") in said, said


def test_doctor_checks_each_a2a_target_of_one_url_that_a_run_would_open_differently(
        agents: A2AAgents, tmp_path: Path, tamesu: Any) -> None:
    # before: doctor checked one target per url, so of the a2a example's six targets (five at one url: another
    # binding, a token and a skill of the extended card) it named two, and a skill the card lacks passed unsaid
    v10 = agents.urls["v10"]
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  by_card: {{ type: a2a, url: '{v10}/a2a' }}
  streamed: {{ type: a2a, url: '{v10}/a2a', stream: true }}
  card_then_grpc: {{ type: a2a, url: '{v10}/a2a', transport: grpc }}
  no_such_skill: {{ type: a2a, url: '{v10}/a2a', skill: no-such-skill }}
tests: [ {{ name: t, target: by_card, scenario: {{ script: [ {{ say: hi }} ] }} }} ]
""")
    result = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    said = result.stdout
    assert f"ok    target by_card (a2a) at {v10}/a2a: " in said, said
    assert "target streamed" not in said, said  # opened as by_card is: its line would say the same
    assert (f"ok    target card_then_grpc (a2a) at {v10}/a2a: agent card Test Shop read at "
            f"{v10}/.well-known/agent-card.json; a run speaks GRPC 1.0") in said, said
    assert f"FAIL  target no_such_skill (a2a) at {v10}/a2a: " in said, said
    assert "no-such-skill" in said.split("target no_such_skill", 1)[1].splitlines()[0], said
    assert result.returncode == 3, said + result.stderr


def test_doctor_tries_the_http_interface_a_card_names_at_another_place(
        agents: A2AAgents, tmp_path: Path, tamesu: Any, serve: Any) -> None:
    # before: "ok ... a run speaks JSONRPC 1.0 at http://127.0.0.1:PORT/a2a (not called ...)" of a place the card
    # named (a container's hostname, a stale port) that no run could reach: only a gRPC interface was tried
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def card_naming(url: str) -> Starlette:
        card = {"name": "Boxed", "version": "1", "description": "d", "capabilities": {}, "skills": [],
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}
        return Starlette(routes=[Route("/.well-known/agent-card.json", lambda _: JSONResponse(card))])

    gone = f"http://127.0.0.1:{refused_port()}/a2a"
    stale, moved = serve(card_naming(gone)).url, serve(card_naming(f"{agents.urls['v10']}/a2a")).url
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  stale: {{ type: a2a, url: '{stale}' }}
  moved: {{ type: a2a, url: '{moved}' }}
tests: [ {{ name: t, target: stale, scenario: {{ script: [ {{ say: hi }} ] }} }} ]
""")
    result = tamesu(["doctor", "suite.yaml"], cwd=tmp_path)
    said = result.stdout
    assert (f"FAIL  target stale (a2a) at {stale}: agent card Boxed read at {stale}/.well-known/agent-card.json; a "
            f"run speaks JSONRPC 1.0 at {gone}, the interface the agent card gives, which cannot be reached: "
            "Connection refused") in said, said
    assert (f"ok    target moved (a2a) at {moved}: agent card Boxed read at {moved}/.well-known/agent-card.json; a "
            f"run speaks JSONRPC 1.0 at {agents.urls['v10']}/a2a (not called: doctor sends the agent no message)") \
        in said, said
    assert result.returncode == 3, said + result.stderr
