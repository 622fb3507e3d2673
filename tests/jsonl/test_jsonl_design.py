"""The agent test design's examples as written (tests/fixtures/design), through `tamesu test`, against the example
expense agent, a recording rest agent, recording helper agents and the local OpenAI- and Anthropic-shaped model
servers: attachments reach every target, script ids, single_turn with turns, what helper agents are sent."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agents.expense_agent import ExpenseAgent, expense_agent, run_test
from model_servers import AnthropicServer, OpenAIServer, text
from tamesu.net.serve import ThreadServer

__all__ = ["expense_agent"]

DESIGN = Path(__file__).parents[1] / "fixtures" / "design"
RECEIPT = DESIGN / "tests" / "fixtures" / "receipt.jpg"
RECEIPT_B64 = base64.b64encode(RECEIPT.read_bytes()).decode()


@dataclass
class Recorder:
    """A rest agent that takes files (JSON or multipart) and helper agents (simulator, validator) that answer
    as the design says, each request kept."""

    chats: list[dict[str, Any]] = field(default_factory=list)
    uploads: list[dict[str, Any]] = field(default_factory=list)
    helpers: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.chats.append(body)
            return JSONResponse({"text": f"Got {len(body.get('files') or [])} file(s); the amount is noted."})

        async def upload(request: Request) -> JSONResponse:
            form = await request.form()
            files = [(item.filename, item.content_type, await item.read()) for item in form.getlist("receipt")
                     if isinstance(item, UploadFile)]
            self.uploads.append({"fields": {k: v for k, v in form.items() if isinstance(v, str)}, "files": files})
            return JSONResponse({"text": f"Uploaded {len(files)} file(s); the amount is noted."})

        async def simulate(request: Request) -> JSONResponse:
            body = await request.json()
            self.helpers.append(body)
            done = any(m["content"].startswith("Expense submitted") for m in body["options"]["metadata"]
                       ["conversation"] if m["role"] == "assistant")
            return JSONResponse({"goal_achieved": True} if done else {"input": "Yes, confirm", "reasoning": "ok"})

        async def validate(request: Request) -> JSONResponse:
            body = await request.json()
            self.helpers.append(body)
            return JSONResponse({"passed": True, "score": 1, "reason": "the checker agrees"})

        return Starlette(routes=[Route("/chat", chat, methods=["POST"]), Route("/upload", upload, methods=["POST"]),
                                 Route("/simulate", simulate, methods=["POST"]),
                                 Route("/validate", validate, methods=["POST"])])


@dataclass
class Servers:
    recorder: Recorder
    openai: OpenAIServer
    anthropic: AnthropicServer
    env: dict[str, str]


@pytest.fixture(scope="module")
def servers(expense_agent: ExpenseAgent) -> Iterator[Servers]:
    recorder, openai, anthropic = Recorder(), OpenAIServer(), AnthropicServer()
    started = [ThreadServer(app).start() for app in (recorder.app(), openai.app, anthropic.app)]
    try:
        desk, openai_at, anthropic_at = (s.url for s in started)
        yield Servers(recorder, openai, anthropic, {
            **expense_agent.env, "DESK_URL": desk, "HELPER_URL": desk, "OPENAI_URL": openai.base_url(openai_at),
            "ANTHROPIC_URL": anthropic.base_url(anthropic_at)})
    finally:
        for server in started:
            server.stop()


def design(args: list[str], servers: Servers, tmp_path: Path) -> Any:
    return run_test([*args, "--out", str(tmp_path)], cwd=DESIGN, env=servers.env)


def _user_messages(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_attachments_reach_openai_as_content_parts(servers: Servers, tmp_path: Path) -> None:
    servers.openai.plan(text("The amount is $42.50."), text("Noted."), text("Thanks."))
    before = len(servers.openai.calls())
    done = design(["-i", "tests/receipt.jsonl", "-n", "vision-openai"], servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [c.body for c in servers.openai.calls()[before:]]
    image = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{RECEIPT_B64}"}}
    # the later revision's example: a file part in the message's content, the path relative to the JSONL file
    assert _user_messages(calls[0]) == [[{"type": "text", "text": "What's in this receipt?"}, image]]
    # the earlier one's: a turn's attachments, the path relative to the project; the image stays in the history
    assert _user_messages(calls[1]) == [[{"type": "text", "text": "I want to submit an expense with receipt"},
                                         image]]
    assert _user_messages(calls[2]) == [_user_messages(calls[1])[0], "The amount is $150"]


def test_attachments_reach_anthropic_as_content_blocks(servers: Servers, tmp_path: Path) -> None:
    servers.anthropic.plan(text("The amount is $42.50."))
    before = len(servers.anthropic.calls())
    done = design(["-i", "tests/receipt.jsonl", "-n", "vision-anthropic"], servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    first = servers.anthropic.calls()[before].body
    assert first["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "What's in this receipt?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": RECEIPT_B64}}]}]


def test_a_rest_target_gets_attachments_in_its_body_or_as_multipart(servers: Servers, tmp_path: Path) -> None:
    recorder = servers.recorder
    recorder.chats.clear()
    recorder.uploads.clear()
    done = design(["-i", "tests/receipt.jsonl", "-n", "desk"], servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    receipt = {"name": "receipt.jpg", "media_type": "image/jpeg", "data": RECEIPT_B64}
    by_message = {c["message"]: c["files"] for c in recorder.chats}
    assert by_message == {"What's in this receipt?": [receipt], "I want to submit an expense with receipt": [receipt],
                          "The amount is $150": []}
    recorder.chats.clear()
    done = design(["-i", "tests/receipt.jsonl", "-n", "desk-default"], servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {c["message"]: c.get("attachments") for c in recorder.chats} == {
        "What's in this receipt?": [receipt], "I want to submit an expense with receipt": [receipt],
        "The amount is $150": None}
    done = design(["-i", "tests/receipt.jsonl", "-n", "desk-form"], servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    uploads = {u["fields"]["message"]: u["files"] for u in recorder.uploads}
    assert uploads["What's in this receipt?"] == [("receipt.jpg", "image/jpeg", RECEIPT.read_bytes())]
    assert uploads["The amount is $150"] == []


def test_a_target_that_cannot_carry_a_file_refuses_the_case_at_load(servers: Servers, tmp_path: Path) -> None:
    recorder = servers.recorder
    sent = len(recorder.chats)
    done = design(["-i", "tests/receipt.jsonl", "-n", "desk-text"], servers, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == (
        "tests/receipt.jsonl:1:136: input[0].content[1].source: the agent under test (desk-text (rest)) cannot get "
        "this file: receipt.jpg: this rest target's request.body does not send files: add \"{{attachments}}\" "
        "to it, or set request.multipart")
    assert lines[1].startswith("tests/receipt.jsonl:2:") and "turns[0].attachments[0].source" in lines[1]
    assert lines[2:] == ["2 problems found"] and len(recorder.chats) == sent  # nothing was sent


def test_script_ids_and_single_turn_turns_as_the_design_writes_them(servers: Servers, tmp_path: Path) -> None:
    done = design(["-i", "tests/single-turn.jsonl", "-n", "assistants.expense", "-o", str(tmp_path / "o.jsonl")],
                  servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    # {"type": "single_turn", "turns": [one]} is {"input": ...}: the same call, the same graded assertion
    assert [(r["id"], r["mode"], r["messages_count"], r["assertions"][0]["passed"]) for r in records] == [
        ("T001", "standard", 1, True), ("T001-turns", "standard", 1, True)]
    generated = design(["-i", "scripts:tests.generate", "-n", "assistants.expense"], servers, tmp_path)
    assert generated.returncode == 0 and "Input: scripts:tests.generate (2 test cases)" in generated.stdout
    flow = design(["-i", "scripts:tests.expense.generate?scenario=approval-flow", "-n", "assistants.expense"],
                  servers, tmp_path)
    assert flow.returncode == 0, flow.stdout + flow.stderr
    assert "[approval-12000]" in flow.stdout and "[approval-50000]" in flow.stdout


def test_validator_agent_with_a_connector_and_a_script_id(servers: Servers, tmp_path: Path) -> None:
    out = tmp_path / "v.jsonl"
    done = design(["-i", "tests/validators.jsonl", "-n", "assistants.expense", "-o", str(out)], servers, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    verdicts = [(a["type"], a["passed"], a["reason"]) for a in json.loads(out.read_text())["assertions"]]
    assert verdicts[1:] == [
        # the `use` agent judged, on the connector's model (its own, validator-default, would have failed it)
        ("agent", True, "openai-gpt4: the confirmation names the amount (workers.test.validator)"),
        ("script", True, "V001: submitted within 100..10000")]


def test_helper_agents_get_what_the_design_sends_them(servers: Servers, tmp_path: Path) -> None:
    cases = tmp_path / "helpers.jsonl"
    cases.write_text(json.dumps({
        "id": "T009", "input": "Business travel, $3500",
        "simulator": {"use": "user-sim", "metadata": {"persona": "New employee", "goal": "Submit expense report"},
                      "options": {"connector": "validator-default"}},
        "final_assertions": [{"type": "agent", "use": "agents:checker", "options": {
            "connector": "openai-gpt4", "metadata": {"criteria": "The expense is submitted"}}}]}) + "\n")
    servers.recorder.helpers.clear()
    done = run_test(["-i", str(cases), "-n", "assistants.expense", "--config", str(DESIGN / "tamesu.yaml"),
                     "--out", str(tmp_path)], cwd=DESIGN, env=servers.env)
    assert done.returncode == 0, done.stdout + done.stderr
    simulator, validator = (body["options"] for body in servers.recorder.helpers)
    asked = simulator["metadata"]
    assert {k: asked[k] for k in ("test_mode", "test_id", "persona", "goal", "turn_count", "turn_number")} == {
        "test_mode": "simulator", "test_id": "T009", "persona": "New employee", "goal": "Submit expense report",
        "turn_count": 1, "turn_number": 2}
    run_dir = next(tmp_path.glob("2*"))
    assert asked["session_id"] == f"{run_dir.name}-1"  # the run's id: each case runs in its own session
    assert asked["tool_results"] == {"create_expense": {"id": "EXP-2025-001", "type": "travel", "amount": 3500,
                                                        "status": "draft"}}
    assert validator["connector"] == "openai-gpt4"
    assert simulator["connector"] == "validator-default"  # before: simulator.options.connector was dropped
    assert validator["metadata"]["test_mode"] == "validator" and validator["metadata"]["test_id"] == "T009"
    # the design's Skip{History: true} with every helper call: "Don't save test messages to history"
    assert simulator["skip"] == validator["skip"] == {"history": True}


def test_the_model_simulator_is_shown_the_turn_count_and_the_tool_results(servers: Servers,
                                                                           tmp_path: Path) -> None:
    cases = tmp_path / "model-sim.jsonl"
    cases.write_text(json.dumps({
        "id": "T010", "input": "I want to submit an expense", "max_turns": 5,
        "simulator": {"use": "openai-local", "metadata": {"persona": "New employee", "goal": "Submit expense"}}})
        + "\n")
    servers.openai.plan(text('{"input": "Business travel, $3500", "reasoning": "it asked the type"}'),
                        text('{"input": "Yes, confirm", "reasoning": "the draft is right"}'))
    before = len(servers.openai.calls())
    done = run_test(["-i", str(cases), "-n", "assistants.expense", "--config", str(DESIGN / "tamesu.yaml"),
                     "--out", str(tmp_path), "-o", str(tmp_path / "o.jsonl")], cwd=DESIGN, env=servers.env)
    assert done.returncode == 0, done.stdout + done.stderr
    asked = [c.body["messages"][-1]["content"] for c in servers.openai.calls()[before:]]
    assert len(asked) == 2 and servers.openai.pending == 0
    # after the agent's first answer (no tools), then after its draft (create_expense and what it returned)
    assert "The agent has answered 1 time(s) so far.\nThe agent called no tools in its last turn." in asked[0]
    assert "The agent has answered 2 time(s) so far." in asked[1]
    shown = asked[1][asked[1].index("returned what follows (by tool name)"):]
    assert json.loads(shown[shown.index("{"):shown.index("Write your next message")]) == {
        "create_expense": {"id": "EXP-2025-001", "type": "travel", "amount": 3500, "status": "draft"}}
    assert "session" not in " ".join(asked).lower()  # the run's id would make every replayed answer a miss
    record = json.loads((tmp_path / "o.jsonl").read_text())
    assert [t["input_source"] for t in record["turns"]] == ["static", "simulator", "simulator"]
    result = json.loads((next(tmp_path.glob("2*")) / record["result"]).read_text())
    notes = [e["data"] for e in result["events"] if e["name"] == "user_side"]
    assert [n.get("simulator_prompt") for n in notes] == ["simulator.v2", "simulator.v2", None]


def test_a_failing_simulator_is_the_cases_error_not_a_verdict(servers: Servers, tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "boom.py").write_text("def simulate(inputs):\n    raise RuntimeError('no idea')\n")
    cases = tmp_path / "broken.jsonl"
    cases.write_text("".join(json.dumps(case) + "\n" for case in [
        {"id": "S1", "input": "I want to submit an expense", "simulator": {"use": "scripts:boom"}},
        {"id": "S2", "input": "I want to submit an expense", "simulator": {"use": "openai-local"}}]))
    servers.openai.plan(*[text("I would rather not say") for _ in range(3)])  # never the JSON asked for
    done = run_test(["-i", str(cases), "-n", "assistants.expense", "--config", str(DESIGN / "tamesu.yaml"),
                     "--out", str(tmp_path), "-o", str(tmp_path / "o.jsonl")], cwd=DESIGN, env=servers.env)
    assert done.returncode == 3, done.stdout + done.stderr
    records = {r["id"]: r for r in map(json.loads, (tmp_path / "o.jsonl").read_text().splitlines())}
    assert {k: (r["status"], r["total_turns"]) for k, r in records.items()} == {"S1": ("error", 1), "S2": ("error", 1)}
    assert records["S1"]["error"] == "simulator scripts:boom raised RuntimeError: no idea"
    assert records["S2"]["error"] == "simulator: no valid JSON after 3 attempts: no JSON object found in the answer"
    assert servers.openai.pending == 0  # asked three times, then given up
    run_dir = next(tmp_path.glob("2*"))
    faults = {k: json.loads((run_dir / r["result"]).read_text())["fault"] for k, r in records.items()}
    # the project's own script raising is the suite's bug (exit 2 alone); a model that cannot answer, the run's
    assert faults == {"S1": "suite", "S2": "environment"}, faults
    cases.write_text(json.dumps({"id": "S1", "input": "I want to submit an expense",
                                 "simulator": {"use": "scripts:boom"}}) + "\n")
    done = run_test(["-i", str(cases), "-n", "assistants.expense", "--config", str(DESIGN / "tamesu.yaml"),
                     "--out", str(tmp_path / "alone")], cwd=DESIGN, env=servers.env)
    assert done.returncode == 2, done.stdout + done.stderr


def test_the_simulator_flag_names_the_simulator_agent_as_both_revisions_write_it(servers: Servers,
                                                                                 tmp_path: Path) -> None:
    cases = tmp_path / "dynamic.jsonl"
    cases.write_text(json.dumps({"id": "D001", "input": "Business travel, $3500", "checkpoints": [
        {"id": "submitted", "assertion": {"type": "tool_called", "name": "submit_expense"}}]}) + "\n")
    for name in ("user-sim", "agents:user-sim"):  # the later revision's bare id, the earlier one's prefix
        servers.recorder.helpers.clear()
        done = run_test(["-i", str(cases), "-n", "assistants.expense", "--simulator", name, "--config",
                         str(DESIGN / "tamesu.yaml"), "--out", str(tmp_path), "-o", str(tmp_path / "o.jsonl")],
                        cwd=DESIGN, env=servers.env)
        assert done.returncode == 0, done.stdout + done.stderr
        record = json.loads((tmp_path / "o.jsonl").read_text())
        assert (record["status"], [t["input_source"] for t in record["turns"]]) == ("passed", ["static", "simulator"])
        assert [body["options"]["metadata"]["test_mode"] for body in servers.recorder.helpers] == ["simulator"]


def test_the_docs_jsonl_cases_run_as_written(expense_agent: ExpenseAgent, tmp_path: Path) -> None:
    # the JSONL page of the docs site (the README's section before it became the front page)
    section = (Path(__file__).parents[2] / "docs" / "jsonl.md").read_text()
    block = section[section.index("```jsonl\n") + len("```jsonl\n"):section.index("```", section.index("```jsonl") + 8)]
    cases = tmp_path / "readme.jsonl"
    cases.write_text(block)
    example = Path(__file__).parents[2] / "examples" / "expense-agent"
    done = run_test(["-i", str(cases), "-n", "expense", "--config", str(example / "tamesu.yaml"), "--out",
                     str(tmp_path / "out"), "-o", str(tmp_path / "o.jsonl")], env=expense_agent.env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["status"]) for r in records) == [
        ("T001", "passed"), ("T002", "passed"), ("T003", "passed"), ("T004", "passed")]
