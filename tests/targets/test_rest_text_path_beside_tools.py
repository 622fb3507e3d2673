"""A `response.text` path the answers never hold, in turns that also call tools: the turn is not failed (an
agent may leave its reply's key out when it only calls tools), but it was not said anywhere either, and
`contains` said only "the agent said nothing in 2 turn(s)" of an agent that had answered every turn. Now the
text check says where tamesu looked, with the answer's keys, and the run counts it along the way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


async def _chat(request: Any) -> JSONResponse:
    await request.json()
    return JSONResponse({"reply": "ORD-1001 has shipped", "tool_calls": [{"name": "lookup_order", "args": {}}]})


def test_a_text_path_found_in_no_answer_is_said_by_the_text_check(tmp_path: Path, tamesu: Any, serve: Any) -> None:
    server = serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])]))
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: "{server.url}/chat", response: {{ text: $.replyy, tool_calls: $.tool_calls }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: where is my order? }}, {{ say: thanks }} ] }}
    assert:
      - contains: shipped
      - tool_called: lookup_order
""")
    done = tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ('✗ contains: expected the agent to say "shipped"; the agent said nothing in 2 turn(s) '
            "(response.text ($.replyy) found nothing in the JSON answer; its keys: reply, tool_calls)") \
        in done.stdout, done.stdout
    assert "along the way: 2 answers where the reply's path found nothing" in done.stdout, done.stdout
