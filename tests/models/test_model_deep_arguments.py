"""Tool-call arguments a model writes nested deeper than tamesu's records hold are the model's fault: the tool is
not called, the turn fails saying why, and the run records a `tool_arguments_invalid` event and metric."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from model_servers import AnthropicServer, OpenAIServer, text, tool_call
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]


def nested(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = [value]
    return value


def test_arguments_nested_too_deep_are_the_models_not_an_internal_error(tmp_path: Path, tamesu: Any,
                                                                        serve: Serve) -> None:
    # before: 900 levels (which Python reads) was `internal error: PydanticSerializationError ... Maximum
    # serialization depth exceeded`, fault: environment, exit 3; 100,000 levels (which it does not) a RecursionError.
    # Then the model was told the arguments were unreadable, as for broken JSON, and asked again: the run passed,
    # though the agent's own runtime would have called the tool with that valid JSON
    gpt, deeper, claude = OpenAIServer(), OpenAIServer(), AnthropicServer()
    gpt.plan(tool_call("lookup", json.dumps({"q": nested(900)})), text("done"))
    deeper.plan(tool_call("lookup", "[" * 100_000 + "]" * 100_000), text("done"))
    claude.plan(tool_call("lookup", {"q": nested(900)}), text("done"))
    urls = [server.base_url(serve(server.app).url) for server in (gpt, deeper, claude)]
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\nmodels:\n"
        f"  gpt: {{ provider: openai, model: gpt-4o-mini, base_url: '{urls[0]}' }}\n"
        f"  deeper: {{ provider: openai, model: gpt-4o-mini, base_url: '{urls[1]}' }}\n"
        f"  claude: {{ provider: anthropic, model: claude-haiku-4-5, base_url: '{urls[2]}' }}\n")
    tools = "tools: [ { name: lookup, parameters: { type: object }, result: { ok: true } } ]"
    (tmp_path / "suite.yaml").write_text("targets:\n" + "".join(
        f"  {name}: {{ type: model, model: {name}, {tools} }}\n" for name in ("gpt", "deeper", "claude")) +
        "tests:\n" + "".join(f"  - {{ name: {name}, target: {name}, scenario: {{ script: [ {{ say: hi }} ] }} }}\n"
                             for name in ("gpt", "deeper", "claude")))
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path,
                  env={"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr
    newest = max((tmp_path / "out").iterdir())
    errors, failures = [], []
    for line in (newest / "results.jsonl").read_text().splitlines():
        [run] = json.loads(line)["runs"]
        assert (run["status"], run["fault"]) == ("failed", "agent"), run
        result = json.loads((newest / run["dir"] / "result.json").read_text())
        errors += [event["data"]["error"] for event in result["events"] if event["name"] == "tool_arguments_invalid"]
        failures.append(result["fault_reason"])
    assert errors == ["the arguments were JSON nested more than 200 levels deep"] * 3, errors
    assert failures == ["conversation: turn 1: the model called lookup with arguments that cannot be read: JSON "
                        "nested more than 200 levels deep, more than a run's records hold: the tool was not called"
                        ] * 3, failures
    # the model was not asked again, as if the arguments had been broken JSON
    assert [len(server.calls()) for server in (gpt, deeper, claude)] == [1, 1, 1]
