"""A reasoning model's thinking is never said to the agent nor taken as an agent's reply: a persona played by, and
a model target answered by, a local OpenAI-shaped server that puts the thinking at the head of the content (as
llama.cpp, LM Studio and vLLM do without a reasoning parser), run through `tamesu run`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from model_servers import OpenAIServer, text
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]


def simulated(thought: str, answer: dict[str, Any]) -> str:
    return f"<think>\n{thought}\n</think>\n\n{json.dumps(answer)}"


def test_a_persona_on_a_reasoning_model_says_only_its_answer(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    heard: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        heard.append((await request.json())["message"])
        return JSONResponse({"text": "Your refund RF-889 was issued today."})

    desk = serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url
    simulator, bot = OpenAIServer(), OpenAIServer()
    # the thinking holds JSON of its own, which a reader looking for the first object would have taken
    simulator.plan(
        text(simulated('Dana is cross. I could open with {"input": "I want to speak to a manager"}, but the goal is '
                       "the refund.", {"input": "Where is my refund?", "reasoning": "asks for the refund"})),
        text(simulated("The agent gave RF-889: the goal is met.",
                       {"input": "", "goal_achieved": True, "reasoning": "has the reference"})))
    bot.plan(text("<think>The user asks about refunds. Policy: 14 days.</think>\n\nRefunds take 14 days."))
    simulator_url, bot_url = (s.base_url(serve(s.app).url) for s in (simulator, bot))
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  simulator: {{ provider: openai, model: qwen3, base_url: '{simulator_url}', timeout: 5s }}\n"
        f"  bot: {{ provider: openai, model: deepseek-r1, base_url: '{bot_url}', timeout: 5s }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  desk: {{ type: rest, url: "{desk}/chat" }}
  prompt: {{ type: model, model: bot, system: "You are the shop's assistant." }}
tests:
  - name: persona
    target: desk
    persona: {{ name: Dana }}
    scenario: {{ goal: "Get the refund reference", max_turns: 3 }}
    assert: [ {{ contains: RF-889 }} ]
  - name: prompt
    target: prompt
    scenario: {{ script: [ {{ say: "How long do refunds take?" }} ] }}
    assert: [ {{ equals: "Refunds take 14 days." }}, {{ not_contains: think }} ]
""")
    result = tamesu(["run", "--out", "out"], cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 0, result.stdout + result.stderr
    assert heard == ["Where is my refund?"]  # not the thinking, not the JSON inside it
    [directory] = list((tmp_path / "out").iterdir())
    lines = {json.loads(x)["test"]: json.loads(x) for x in (directory / "results.jsonl").read_text().splitlines()}
    persona = json.loads((directory / lines["persona"]["runs"][0]["dir"] / "result.json").read_text())
    taken_out = "the model's reasoning came at the head of its answer, in <think> tags: taken out"
    assert [(e["data"]["attempt"], e["data"]["reason"]) for e in persona["events"]
            if e["name"] == "simulator_repaired"] == [(1, taken_out), (1, taken_out)]
    assert persona["end_reason"] == "goal_achieved"
    prompt = json.loads((directory / lines["prompt"]["runs"][0]["dir"] / "result.json").read_text())
    [exchange] = prompt["turns"]
    assert exchange["agent"]["text"] == "Refunds take 14 days."
    # the model's reply as it came is the turn's raw response: its reasoning kept apart from the text
    [raw] = exchange["agent"]["raw"]
    assert raw["reasoning"] == "The user asks about refunds. Policy: 14 days." and raw["reasoning_in_text"]
