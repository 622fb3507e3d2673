"""The model target through `tamesu run` against the local OpenAI-shaped server: what a repeated test asks the
model, with the replay cache on (the default)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from model_servers import OpenAIServer, text
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]

SUITE = """\
targets:
  bot: { type: model, model: bot, system: "You are the shop's assistant." }
tests:
  - name: greets
    target: bot
    repeat: 3
    scenario: { script: [ { say: "Say hello" } ] }
    assert: [ { contains: hello } ]
"""


def test_each_run_of_a_repeated_model_target_asks_the_model(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: run 1 asked the model and runs 2 and 3 replayed its answer from the cache (the same request), so a
    # model right once in three passed 3 of 3, pass^3 1.00, on one answer
    bot = OpenAIServer()
    bot.plan(text("hello there"), text("goodbye"), text("goodbye"))
    url = bot.base_url(serve(bot.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: ['suite.yaml']\nmodels:\n  bot: {{ provider: openai, model: gpt-4o-mini, base_url: '{url}' }}\n")
    (tmp_path / "suite.yaml").write_text(SUITE)

    def passed(*options: str) -> list[bool]:
        done = tamesu(["run", "--out", "out", "--color", "never", *options], cwd=tmp_path,
                      env={"OPENAI_API_KEY": "sk-test"})
        assert done.returncode == 1, done.stdout + done.stderr
        newest = max((tmp_path / "out").iterdir())
        [line] = (newest / "results.jsonl").read_text().splitlines()
        runs = json.loads(line)["runs"]
        return sorted(json.loads((newest / run["dir"] / "result.json").read_text())["status"] == "passed"
                      for run in runs)

    assert passed() == [False, False, True]
    assert len(bot.calls()) == 3
    # each run's answer was recorded under its own key: a replay gives the same verdicts, asking nothing
    assert passed("--cache-only") == [False, False, True]
    assert len(bot.calls()) == 3
