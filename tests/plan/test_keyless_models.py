"""A model whose provider needs an API key, with none written and none in its environment variable: `validate`
said `ok` and every test that called it was an error at run time (`simulator: openai: no API key (set
OPENAI_API_KEY or models.X.api_key)`, exit 3). Now a warning where the model is written, naming the model's own
key; none for a server on this machine, a key written, or one in the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tamesu.plan import load_plan

_SUITE = """\
models:
  simulator:
    provider: openai
    model: gpt-4o-mini
    fallback: "anthropic:claude-3-5-haiku-latest"
  judge: { provider: openai, model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1" }
  grader: { provider: openai, model: gpt-4o-mini, api_key: "sk-written" }
targets:
  shop: { type: rest, url: "http://127.0.0.1:9/chat" }
tests:
  - name: t
    target: shop
    scenario: { goal: "Find out where order ORD-1001 is" }
"""


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)


def test_a_model_with_no_key_to_send_is_a_warning_where_it_is_written(tmp_path: Path, no_keys: None) -> None:
    (tmp_path / "s.yaml").write_text(_SUITE)
    plan = load_plan([tmp_path / "s.yaml"])
    said = [str(w).removeprefix(f"{tmp_path}/") for w in plan.warnings]
    assert said == [
        "s.yaml:3:15: models.simulator.provider: no API key: OPENAI_API_KEY is not set and models.simulator.api_key "
        "is not written: a test that calls this model will be an error (answers in the replay cache need none)",
        "s.yaml:5:15: models.simulator.fallback: no API key: ANTHROPIC_API_KEY is not set and "
        "models.simulator.fallback.api_key is not written: a test that calls this model will be an error (answers "
        "in the replay cache need none)",
    ], said


def test_a_key_in_the_environment_is_enough(tmp_path: Path, no_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://localhost:8080")
    (tmp_path / "s.yaml").write_text(_SUITE)
    assert load_plan([tmp_path / "s.yaml"]).warnings == []
