"""Whether the agent awaits input after a turn: the design's priority order, with the reason recorded."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from jsonl.test_jsonl_run import run_cases
from model_servers import AnthropicServer, text
from tamesu.conversation import AgentTurn, ToolCall
from tamesu.roles.awaiting import detect


def turn(text: str = "", response: Any = None, tools: tuple[str, ...] = ()) -> AgentTurn:
    return AgentTurn(text=text, response=response, tool_calls=[ToolCall(name=name) for name in tools])


@pytest.mark.parametrize(("agent", "awaiting", "reason", "hint"), [
    # 1. what the agent declares wins, both ways
    (turn("Done.", {"awaiting_input": True, "input_hint": "PO-1"}), True, "agent_declared", "PO-1"),
    (turn("What else?", {"awaiting_input": False}), False, "agent_declared_done", None),
    # 2. A2A task states, either protocol version
    (turn("Done?", {"status": {"state": "completed"}}), False, "task_completed", None),
    (turn("Which order?", {"status": {"state": "TASK_STATE_INPUT_REQUIRED"}}), True, "input_required_state", None),
    (turn("", {"status": {"state": "input-required"}}), True, "input_required_state", None),
    # 3. tools that ask the user
    (turn("Working on it.", tools=("request_confirmation",)), True, "tool_requires_confirmation", None),
    # 4. a model's finish reason
    (turn("The policy says", {"finish_reason": "length"}), False, "finish_reason_length", None),
    # ... and Anthropic's words for the same (a cut answer that starts "Please" read as a question before)
    (turn("Please note that the policy", {"finish_reason": "max_tokens"}), False, "finish_reason_max_tokens", None),
    (turn("What you need is", {"finish_reason": "model_context_window_exceeded"}), False,
     "finish_reason_model_context_window_exceeded", None),
    (turn("Which one? Let me look it up", {"finish_reason": "tool_use"}), False, "finish_reason_tool_use", None),
    # 5. the words
    (turn("Which order do you mean"), True, "content_is_question", None),
    (turn("This needs approval. Please provide PO number."), True, "content_is_question", None),
    (turn("Shall we proceed?"), True, "content_is_question", None),
    (turn("Could you send the receipt"), True, "content_is_question", None),
    # 6. otherwise the agent is done
    (turn("Expense submitted. Reference: EXP-1"), False, "completed", None),
    (turn(""), False, "completed", None),
])
def test_priority_order(agent: AgentTurn, awaiting: bool, reason: str, hint: str | None) -> None:
    verdict = detect(agent)
    assert (verdict.awaiting, verdict.reason, verdict.hint) == (awaiting, reason, hint)


async def test_a_claude_answer_cut_at_its_token_limit_does_not_await(serve: Any, tmp_path: Path) -> None:
    # a model target on a local Anthropic-shaped server: the answer stops at max_tokens mid-sentence, starting
    # with "Please" (a question by the words); the case went on waiting for input and was skipped
    server = AnthropicServer()
    server.plan(text("Please note that the travel policy allows", stop="length"))
    url = server.base_url(serve(server.app).url)
    (tmp_path / "tamesu.yaml").write_text(textwrap.dedent(f"""\
        targets:
          claude: {{ type: model, model: claude, system: "You explain the expense policy." }}
        models:
          claude: {{ provider: anthropic, model: claude-test, base_url: "{url}", api_key: k, timeout: 10s }}
        """))
    case = {"id": "cut", "type": "multi_turn", "input": "What is the travel policy?"}
    outcome, _ = await run_cases(tmp_path, json.dumps(case), target="claude")
    (record,) = outcome.records
    assert server.calls()[0].path == "/v1/messages"
    assert record.status == "passed", record
    assert [(t.awaiting_input, t.awaiting_reason) for t in record.turns or []] == [
        (False, "finish_reason_max_tokens")]
