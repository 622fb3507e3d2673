"""Tool-call arguments a model writes nested deeper than tamesu's records hold are the model's fault, said as the
model target says any arguments it cannot read: the tool is not called, the model is told, and the run records a
`tool_arguments_invalid` event and metric."""

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
    # serialization depth exceeded`, fault: environment, exit 3; 100,000 levels (which it does not) a RecursionError
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
    assert done.returncode == 0, done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr
    newest = max((tmp_path / "out").iterdir())
    errors = []
    for line in (newest / "results.jsonl").read_text().splitlines():
        [run] = json.loads(line)["runs"]
        result = json.loads((newest / run["dir"] / "result.json").read_text())
        errors += [event["data"]["error"] for event in result["events"] if event["name"] == "tool_arguments_invalid"]
    assert errors == ["the arguments were JSON nested more than 200 levels deep"] * 3, errors
    # the model was told its call was not made, and answered
    assert all("nested more than 200 levels deep" in json.dumps(call.body["messages"][-1])
               for call in (gpt.calls()[1], deeper.calls()[1], claude.calls()[1]))
