"""What a JSONL case names, resolved when it loads: script ids and their conventional functions, single_turn cases
written with one turn, relative attachment paths (the JSONL file's folder, then the project's), and which files
each model provider takes (so a case is refused at load, never sent without its file)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from agents.expense_agent import run_test
from sdk_groups import IN_PROCESS_SDKS
from tamesu.checks.functions import load_function
from tamesu.errors import ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_text
from tamesu.models.attachments import refusal
from tamesu.models.base import Message, MessageFile
from tamesu.plan.targets import Resolver
from tamesu.roles.files import file_path


def _parse(lines: list[dict], tmp_path: Path, search: list[Path] | None = None) -> list:
    text = "\n".join(json.dumps(line) for line in lines)
    return parse_text(text, "cases.jsonl", tmp_path, ParseSettings(Resolver(search=search or [tmp_path])))


def _problems(lines: list[dict], tmp_path: Path, search: list[Path] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        _parse(lines, tmp_path, search)
    return [p.message for p in caught.value.problems]


def test_a_script_id_is_a_file_under_scripts_with_the_roles_function(tmp_path: Path) -> None:
    folder = tmp_path / "scripts" / "tests"
    folder.mkdir(parents=True)
    (folder / "validate-expense.py").write_text("def validate(run):\n    return True\n")
    (folder / "expense.py").write_text("def generate(params):\n    return []\n")
    (folder / "no-function.py").write_text("def check(run):\n    return True\n")
    assert load_function("scripts:tests.validate-expense", [tmp_path]).__name__ == "validate"
    # no scripts/tests/expense/generate.py: the last part names a function of scripts/tests/expense.py
    assert load_function("scripts:tests.expense.generate", [tmp_path], "generate").__name__ == "generate"
    with pytest.raises(ValueError, match=r"no-function.py has no function 'validate' \(a script id calls validate"):
        load_function("scripts:tests.no-function", [tmp_path])
    with pytest.raises(ValueError, match=r"no script 'tests.nowhere': looked for .*scripts/tests/nowhere.py"):
        load_function("scripts:tests.nowhere", [tmp_path])
    # tamesu's own form still works beside the design's
    (tmp_path / "checks.py").write_text("def names_limit(run):\n    return True\n")
    assert load_function("scripts:checks:names_limit", [tmp_path]).__name__ == "names_limit"
    assert _problems([{"id": "a", "input": "hi", "assertions": [
        {"type": "script", "use": "scripts:tests.nowhere"}]}], tmp_path)[0].startswith("no script 'tests.nowhere'")
    # a simulator's script id calls simulate()
    (folder / "user-sim.py").write_text("def simulate(inputs):\n    return None\n")
    [case] = _parse([{"id": "s", "input": "hi", "simulator": {"use": "scripts:tests.user-sim"}}], tmp_path)
    assert case.simulator.kind == "script" and case.simulator.function.__name__ == "simulate"


def test_single_turn_with_one_turn_is_a_standard_case(tmp_path: Path) -> None:
    (tmp_path / "r.png").write_bytes(b"\x89PNG")
    [case] = _parse([{"id": "a", "type": "single_turn", "options": {"mode": "chat"}, "turns": [
        {"input": "Hello", "assertions": [{"type": "contains", "value": "Hi"}], "options": {"metadata": {"k": 1}},
         "attachments": [{"type": "image", "source": "file://r.png"}]}]}], tmp_path)
    assert case.case.mode == "standard" and case.case.turns == []
    [message] = case.case.input
    assert [p.type for p in message.content] == ["text", "image"] and message.text == "Hello"
    assert case.case.options.sent() == {"mode": "chat", "metadata": {"k": 1}}
    assert [g.assertion.label for g in case.final] == ['contains "Hi"'] and case.turn_assertions == {}
    assert _problems([{"id": "b", "type": "single_turn", "turns": [{"input": "x"}, {"input": "y"}]},
                      {"id": "c", "type": "single_turn", "input": "x", "turns": [{"input": "y"}]},
                      {"id": "d", "type": "single_turn", "simulator": {"use": "x"}, "input": "x"}], tmp_path) == [
        "a single_turn case has one turn, not 2 (drop type: single_turn to play them in order)",
        "the input is turns[0].input or input, not both",
        "a single_turn case has no simulator"]


def test_relative_attachments_are_looked_for_beside_the_file_then_in_the_project(tmp_path: Path) -> None:
    jsonl_dir, project = tmp_path / "tests", tmp_path
    (jsonl_dir / "fixtures").mkdir(parents=True)
    (jsonl_dir / "fixtures" / "a.jpg").write_bytes(b"beside")
    (project / "fixtures").mkdir()
    (project / "fixtures" / "a.jpg").write_bytes(b"project")
    (project / "fixtures" / "b.jpg").write_bytes(b"project")
    assert file_path("file://./fixtures/a.jpg", [jsonl_dir, project]) == jsonl_dir / "fixtures" / "a.jpg"
    assert file_path("file://./fixtures/b.jpg", [jsonl_dir, project]) == project / "fixtures" / "b.jpg"
    assert file_path("https://example.invalid/x.jpg", [jsonl_dir]) is None
    settings = ParseSettings(Resolver(), file_dirs=[project])
    with pytest.raises(ConfigError) as caught:
        parse_text(json.dumps({"id": "x", "input": [{"role": "user", "content": [
            {"type": "image", "source": "file://./c.jpg"}]}]}), "t.jsonl", jsonl_dir, settings)
    assert caught.value.problems[0].message == f"file not found: {jsonl_dir / './c.jpg'} or {project / './c.jpg'}"


@pytest.mark.parametrize(("provider", "mime", "by_url", "reason"), [
    ("openai", "image/jpeg", True, None),
    ("openai", "application/pdf", False, None),
    ("openai", "audio/wav", False, None),
    ("openai", "audio/ogg", False, "openai takes audio as wav or mp3, not audio/ogg"),
    ("openai", "application/pdf", True, "openai takes application/pdf files as bytes, not as a URL (only images "
                                        "may be URLs)"),
    ("anthropic", "image/png", False, None),
    ("anthropic", "text/plain", False, None),
    ("anthropic", "image/bmp", False, "anthropic takes jpeg, png, gif or webp images, not image/bmp"),
    ("anthropic", "audio/wav", False, "anthropic takes images, PDF and text files, not audio/wav"),
    ("fake", "audio/wav", False, None),
])
def test_which_files_each_provider_takes(provider: str, mime: str, by_url: bool, reason: str | None) -> None:
    assert refusal(provider, mime, by_url) == reason


def test_a_message_without_files_dumps_as_before_so_cache_keys_stay() -> None:
    assert Message(role="user", content="hi").model_dump() == {
        "role": "user", "content": "hi", "tool_calls": [], "tool_call_id": None, "name": None}
    from tamesu.models.base import ModelRequest

    request = ModelRequest(purpose="target", messages=[Message(role="user", content="hi")])
    assert "files" not in request.model_dump(mode="json")["messages"][0]  # the replay cache's key reads this
    with_file = Message(role="user", content="hi", files=[MessageFile(name="a.png", mime="image/png", data="AA==")])
    assert with_file.model_dump()["files"] == [{"name": "a.png", "mime": "image/png", "data": "AA==", "url": None}]


async def test_a_script_simulator_gets_the_runs_context() -> None:
    from tamesu.conversation import AgentTurn, Exchange, ToolCall, UserTurn
    from tamesu.roles.scripted_users import ScriptSimulator
    from tamesu.suite.templates import Context

    seen: list[dict] = []

    def simulate(inputs: dict) -> dict:
        seen.append(inputs)
        return {"input": "Yes, confirm"}

    exchanges = [Exchange(1, UserTurn(text="Travel, $3500"), AgentTurn(text="Confirm?", tool_calls=[
        ToolCall(name="create_expense", args={"amount": 3500}, result={"id": "EXP-1"})]))]
    user = ScriptSimulator(simulate, "scripts:tests.user-sim", {"goal": "file it"}, 10, "T001")
    action = await user.next_turn(exchanges, Context(run={"id": "run-7", "number": 1}))
    assert action.turn is not None and action.turn.text == "Yes, confirm"
    assert {k: seen[0][k] for k in ("test_id", "session_id", "turn_count", "turn_number", "tool_results", "goal")} == {
        "test_id": "T001", "session_id": "run-7", "turn_count": 1, "turn_number": 2,
        "tool_results": {"create_expense": {"id": "EXP-1"}}, "goal": "file it"}


@IN_PROCESS_SDKS  # the only test here that calls the SDKs in this process
async def test_each_kind_of_file_reaches_the_local_model_servers_in_its_providers_shape(serve: Any) -> None:
    from model_servers import AnthropicServer, OpenAIServer
    from tamesu.models.anthropic import AnthropicProvider
    from tamesu.models.base import ModelRequest
    from tamesu.models.openai import OpenAIProvider

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    pdf, wav, note = MessageFile(name="r.pdf", mime="application/pdf", data=b64(b"%PDF-1.4")), \
        MessageFile(name="v.wav", mime="audio/wav", data=b64(b"RIFF")), \
        MessageFile(name="n.txt", mime="text/plain", data=b64("total: 42 €".encode()))
    photo = MessageFile(name="p.png", mime="image/png", url="https://example.invalid/p.png")
    openai_server, anthropic_server = OpenAIServer(), AnthropicServer()
    openai = OpenAIProvider("m", api_key="k", base_url=openai_server.base_url(serve(openai_server.app).url))
    anthropic = AnthropicProvider("m", api_key="k", base_url=anthropic_server.base_url(serve(anthropic_server.app).url))
    try:
        await openai.generate(ModelRequest(purpose="target", messages=[
            Message(role="user", content="see", files=[pdf, wav, note, photo])]))
        await anthropic.generate(ModelRequest(purpose="target", messages=[
            Message(role="user", content="see", files=[pdf, note, photo])]))
    finally:
        await openai.aclose()
        await anthropic.aclose()
    assert openai_server.calls()[0].body["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "file", "file": {"filename": "r.pdf", "file_data": f"data:application/pdf;base64,{pdf.data}"}},
        {"type": "input_audio", "input_audio": {"data": wav.data, "format": "wav"}},
        {"type": "text", "text": "[n.txt]\ntotal: 42 €"},
        {"type": "image_url", "image_url": {"url": "https://example.invalid/p.png"}}]
    assert anthropic_server.calls()[0].body["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "document", "title": "r.pdf", "source": {"type": "base64", "media_type": "application/pdf",
                                                          "data": pdf.data}},
        {"type": "document", "title": "n.txt", "source": {"type": "text", "media_type": "text/plain",
                                                          "data": "total: 42 €"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.invalid/p.png"}}]


def test_a_generator_returning_broken_jsonl_is_its_own_failure_at_its_line(tmp_path: Path) -> None:
    # before: exit 2, "-i scripts:gen:cases: Expecting property name ...: line 1 column 2" of its second line
    (tmp_path / "gen.py").write_text("def cases(inputs):\n"
                                     "    return '{\"id\": \"g1\", \"input\": \"hi\"}\\n{not json'\n")
    (tmp_path / "tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: http://127.0.0.1:9/chat }\n")
    done = run_test(["-i", "scripts:gen:cases", "-n", "bot"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr  # the project's own script: the suite's to fix
    assert "tamesu test: generator gen:cases returned JSONL whose line 2 is not JSON: Expecting property name " \
           "enclosed in double quotes (column 2)" in done.stderr, done.stderr
