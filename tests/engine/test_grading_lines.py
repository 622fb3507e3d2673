"""The line of an assertion that could not be decided names its check once: before, `! judge: judge: no verdict
that fits the schema ...` (the judge's own error already said `judge:`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import run_tamesu
from model_servers import OpenAIServer, text
from tamesu.net.serve import ThreadServer


def test_a_judge_that_never_answered_in_shape_is_named_once(tmp_path: Path,
                                                          serve: Callable[[Any], ThreadServer]) -> None:
    judge = OpenAIServer()
    url = judge.base_url(serve(judge.app).url)
    judge.plan(*[text("I would rather not say")] * 3)
    (tmp_path / "s.tamesu.yaml").write_text(f"""
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
  judge: {{ provider: openai, model: judge-model, base_url: "{url}", timeout: 5s }}
tests:
  - {{ name: judged, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ judge: "The agent greets" }} ] }}
""")
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--no-cache"], cwd=tmp_path,
                      env={"OPENAI_API_KEY": "sk-local-0123456789"})
    assert done.returncode == 3, done.stdout + done.stderr
    assert "judge: no verdict that fits the schema after 3 attempts" in done.stdout, done.stdout
    assert "judge: judge:" not in done.stdout
    [row] = map(json.loads, next((tmp_path / "out").glob("*/results.jsonl")).read_text().splitlines())
    assert "judge: judge:" not in json.dumps(row)
