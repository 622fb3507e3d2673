"""An agent that keeps no history of its own (a stateless chat API taking OpenAI-style `messages`) is sent the
conversation so far with every turn, as `{{messages}}`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tamesu.net.serve import ThreadServer


def stateless_agent(received: list[list[dict[str, Any]]]) -> Starlette:
    """Answers from the messages it is sent alone: what the user said so far, and how many answers it gave."""

    async def chat(request: Request) -> JSONResponse:
        messages = (await request.json())["messages"]
        received.append(messages)
        said = [m["content"] for m in messages if m["role"] == "user"]
        answered = sum(m["role"] == "assistant" for m in messages)
        if "look it up" in said[-1]:  # an answer of tool calls alone
            return JSONResponse({"tool_calls": [{"name": "lookup_order", "args": {"id": "ORD-7"}}]})
        return JSONResponse({"text": f"heard so far: {' | '.join(said)} (my answers before: {answered})"})

    return Starlette(routes=[Route("/api/chat", chat, methods=["POST"])])


def test_every_turn_carries_the_conversation_so_far(tmp_path: Path, tamesu: Any,
                                                    serve: Callable[[Any], ThreadServer]) -> None:
    # before: {{messages}} held only this turn in a suite, so a stateless agent forgot every earlier turn
    received: list[list[dict[str, Any]]] = []
    url = serve(stateless_agent(received)).url
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{url}/api/chat", request: {{ body: {{ messages: "{{{{messages}}}}" }} }} }}
tests:
  - name: remembers
    target: bot
    scenario: {{ script: [ {{ say: "I need a table" }}, {{ say: "for four" }}, {{ say: "at eight" }} ] }}
    assert:
      - {{ contains: "heard so far: I need a table | for four | at eight (my answers before: 2)", on_turn: 3 }}
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [[m["role"] for m in sent] for sent in received] == [
        ["user"], ["user", "assistant", "user"], ["user", "assistant", "user", "assistant", "user"]]
    assert received[2][1] == {"role": "assistant", "content": "heard so far: I need a table (my answers before: 0)"}
    # a new run is a new conversation
    again = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert again.returncode == 0 and [m["role"] for m in received[3]] == ["user"]
    [first, _] = sorted((tmp_path / "out").rglob("result.json"))
    assert json.loads(first.read_text())["status"] == "passed"


def test_messages_outside_a_targets_request_is_refused_where_it_is_written(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/api/chat", request: { body: { messages: "{{messages}}" } } }
tests:
  - name: t
    target: bot
    scenario: { script: [ { say: "{{messages}}" } ] }
""")
    done = tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("s.tamesu.yaml:6:34: tests[0].scenario.script[0].say: bad template {{messages}}: "
                                  "the turn being sent, for the target's request (its url, headers, body)"), done.stderr


def test_an_answer_of_tool_calls_alone_adds_no_empty_assistant_message(
        tmp_path: Path, tamesu: Any, serve: Callable[[Any], ThreadServer]) -> None:
    # an empty assistant message is refused by some models' APIs (Anthropic's), which a stateless agent relays
    received: list[list[dict[str, Any]]] = []
    url = serve(stateless_agent(received)).url
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: "{url}/api/chat", request: {{ body: {{ messages: "{{{{messages}}}}" }} }} }}
tests:
  - name: looks up
    target: bot
    scenario: {{ script: [ {{ say: "look it up" }}, {{ say: "thanks" }} ] }}
    assert: [ {{ tool_called: lookup_order }} ]
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert received[1] == [{"role": "user", "content": "look it up"}, {"role": "user", "content": "thanks"}]
