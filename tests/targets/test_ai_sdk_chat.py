"""A chat route written with the Vercel AI SDK, served by node with the SDK's mock model (the SDK from npm,
`make js-sdk`). AI SDK 7 (tests/js/ai_sdk_chat.mjs: UI messages in, a UI message stream out): the rest target sends
the conversation as UI messages (`{{ui_messages}}`) and reads the stream by its types. AI SDK 4
(tests/js/ai4/ai_sdk4_chat.mjs: `{role, content}` messages in, the data stream protocol out): `{{messages}}`, and
the protocol's parts read. Either way: the reply from its text (never the model's reasoning), tool calls with their
results, a failed stream as the turn's failure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from lifeline import tied

JS = Path(__file__).resolve().parents[1] / "js"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (JS / "node_modules" / ".installed").exists()
    or not (JS / "ai4" / "node_modules").exists(),
    reason="the Vercel AI SDK is not installed: `make js-sdk` (needs node and npm)")


def _route(script: Path) -> Iterator[str]:
    process = subprocess.Popen(tied(["node", str(script)]), cwd=script.parent, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        match = re.search(r"listening on (\S+)", process.stdout.readline())
        assert match, "the AI SDK route did not start"
        yield match.group(1) + "/api/chat"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def route() -> Iterator[str]:
    yield from _route(JS / "ai_sdk_chat.mjs")


@pytest.fixture(scope="module")
def route4() -> Iterator[str]:
    yield from _route(JS / "ai4" / "ai_sdk4_chat.mjs")


_SEEN_TOOLS = " [tool results: lookup_order]"
"""What AI SDK 7's mock model adds to its reply when its prompt holds the lookup's result."""


@pytest.mark.parametrize(("version", "messages", "said", "seen"), [
    # before: {{ui_messages}} did not exist (the route refused {role, content}); the reasoning's deltas were read
    # into the reply; tool calls were not seen; then the history it sent back held the assistant's text alone, so
    # on the third turn the model no longer saw the lookup's result
    pytest.param("7", "ui_messages", "ui_message_stream", _SEEN_TOOLS, id="ai-sdk-7"),
    # before: the data stream's lines (`0:"heard so f"`, `9:{...}`) were the reply; tool calls were not seen
    pytest.param("4", "messages", "data_stream", "", id="ai-sdk-4"),
])
def test_a_conversation_with_an_ai_sdk_route(version: str, messages: str, said: str, seen: str, route: str,
                                             route4: str, tmp_path: Path, tamesu: Any) -> None:
    url = route if version == "7" else route4
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: "{url}", request: {{ body: {{ messages: "{{{{{messages}}}}}" }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: "hello" }}, {{ say: "where is ORD-7" }}, {{ say: "thanks" }} ] }}
    assert:
      - {{ equals: "heard so far: hello", on_turn: 1 }}
      - {{ equals: "heard so far: hello | where is ORD-7{seen}", on_turn: 2 }}
      - {{ equals: "heard so far: hello | where is ORD-7 | thanks{seen}", on_turn: 3 }}
      - {{ tool_called: {{ name: lookup_order, args: {{ id: ORD-7 }} }} }}
  - name: broken
    target: shop
    scenario: {{ script: [ {{ say: "please break" }} ] }}
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    results = {r["test"]: r for r in (json.loads(p.read_text()) for p in (tmp_path / "out").rglob("result.json"))}
    order = results["order"]
    assert order["status"] == "passed", json.dumps(order["assertions"]) + done.stdout
    [call] = order["turns"][1]["agent"]["tool_calls"]
    assert (call["name"], call["args"], call["result"]) == ("lookup_order", {"id": "ORD-7"},
                                                            {"id": "ORD-7", "status": "shipped"})
    assert [e["name"] for e in order["events"]].count(said) == 1
    assert results["broken"]["status"] == "failed" and done.returncode == 1
    assert "the agent's stream reported an error: An error occurred." in done.stdout, done.stdout


def _without_ids(message: dict[str, Any]) -> dict[str, Any]:
    """A UI message as compared: ids are each side's own (tamesu numbers its messages, the SDK leaves them empty)."""
    return {"role": message["role"], "parts": [{k: v for k, v in part.items() if k != "id"}
                                               for part in message["parts"]]}


def test_the_history_sent_back_is_what_use_chat_keeps(route: str, tmp_path: Path, tamesu: Any) -> None:
    """Each request's UI messages are the previous request's and the assistant's UI message exactly as the AI SDK's
    own `readUIMessageStream` (what useChat keeps) built it from that answer: its steps, its reasoning, the tool call
    with its input and output, its text. Before, the assistant's text alone was sent back."""
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: "{route}", request: {{ body: {{ messages: "{{{{ui_messages}}}}" }} }} }}
tests:
  - name: kept
    scenario: {{ script: [ {{ say: "history check one" }}, {{ say: "and ORD-9" }}, {{ say: "bye" }} ] }}
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    with urllib.request.urlopen(route.replace("/api/chat", "/api/log"), timeout=10) as answer:
        log = [entry for entry in json.load(answer)
               if entry["received"][0]["parts"][0].get("text") == "history check one"]
    assert len(log) == 3
    tool_parts = [part for part in log[1]["kept"]["parts"] if part["type"] == "tool-lookup_order"]
    assert tool_parts and tool_parts[0]["state"] == "output-available"  # the SDK's message has the call to send back
    for earlier, later in pairwise(log):
        expected = [*earlier["received"], earlier["kept"]]
        assert [_without_ids(m) for m in later["received"][:-1]] == [_without_ids(m) for m in expected]
        assert later["received"][-1]["role"] == "user"
