"""`similar_to` with `method: embedding` and `embedding_model` naming a model under `models:`: the openai SDK's
`embeddings.create` against the local OpenAI-shaped server (its vectors count topic words: model_servers.
EMBEDDING_TOPICS), through the replay cache and the ledger; a refused key is the test's error; an anthropic model
is refused where the suite names it; the fake provider's vectors offline."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import run_tamesu, why
from model_servers import OpenAIServer, text
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]
KEY = "sk-embeddings-0123456789abcdef"

_SUITE = """
name: refunds
targets:
  agent: {{ type: model, model: agent }}
models:
  agent: {{ provider: openai, model: agent-model, base_url: "{url}", api_key: "{{{{env.EMBED_KEY}}}}" }}
  vectors: {embedder}
tests:
  - name: a refund promised
    scenario: {{ script: [ {{ say: "When do I get my money?" }} ] }}
    assert:
      - similar_to: {{ value: "Your refund is on its way", method: embedding, embedding_model: vectors, min: 0.9 }}
  - name: a greeting only
    scenario: {{ script: [ {{ say: "Hi" }} ] }}
    assert:
      - similar_to: {{ value: "Your refund is on its way", method: embedding, embedding_model: vectors, min: 0.9 }}
"""


def _results(out: Path) -> dict[str, dict[str, Any]]:
    run_dir = max(p for p in out.iterdir() if p.is_dir())
    return {row["test"]: row for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def _suite(tmp_path: Path, url: str, embedder: str) -> None:
    (tmp_path / "refunds.tamesu.yaml").write_text(_SUITE.format(url=url, embedder=embedder))


def test_similar_to_by_a_models_embeddings_api(tmp_path: Path, serve: Serve) -> None:
    server = OpenAIServer(require_key=KEY)
    url = server.base_url(serve(server.app).url)
    server.plan(text("Your money will be refunded within 5 days."), text("Hello and welcome!"))
    _suite(tmp_path, url, f'{{ provider: openai, model: text-embedding-3-small, base_url: "{url}", '
                          'api_key: "{{env.EMBED_KEY}}" }')
    env = {"EMBED_KEY": KEY}
    done = run_tamesu(["run", "refunds.tamesu.yaml", "--out", "out", "--parallel", "1"], cwd=tmp_path, env=env)
    results = _results(tmp_path / "out")
    assert results["a refund promised"]["status"] == "passed", why(results["a refund promised"])
    greeting = results["a greeting only"]
    assert greeting["status"] == "failed" and done.returncode == 1, done.stdout + done.stderr
    reason = greeting["runs"][0]["failures"][0]["reason"]
    assert 'is only 0.01 similar (embedding by vectors, min 0.9): "Hello and welcome!"' in reason, reason
    asked = server.embedding_calls()
    assert [(call.body["model"], call.body["input"]) for call in asked] == [
        ("text-embedding-3-small", ["Your refund is on its way", "Your money will be refunded within 5 days."]),
        ("text-embedding-3-small", ["Your refund is on its way", "Hello and welcome!"])]
    # replayed from the cache the second time: the same answers, no new request
    server.plan(text("Your money will be refunded within 5 days."), text("Hello and welcome!"))
    again = run_tamesu(["run", "refunds.tamesu.yaml", "--out", "out", "--parallel", "1"], cwd=tmp_path, env=env)
    assert again.returncode == 1 and len(server.embedding_calls()) == 2, again.stdout + again.stderr


def test_a_refused_key_is_the_tests_error_not_the_agents_failure(tmp_path: Path, serve: Serve) -> None:
    server = OpenAIServer(require_key=KEY)
    url = server.base_url(serve(server.app).url)
    server.plan(text("Your money will be refunded within 5 days."))
    _suite(tmp_path, url, f'{{ provider: openai, model: text-embedding-3-small, base_url: "{url}", '
                          'api_key: "wrong-key-0123456789" }')
    done = run_tamesu(["run", "refunds.tamesu.yaml", "--out", "out", "--filter", "a refund promised", "--no-cache"],
                      cwd=tmp_path, env={"EMBED_KEY": KEY})
    row = _results(tmp_path / "out")["a refund promised"]
    assert row["status"] == "error" and done.returncode == 3, why(row) + done.stdout
    assert "similar_to: the embedding model vectors did not answer" in json.dumps(row), why(row)
    assert "wrong-key" not in done.stdout + done.stderr


@pytest.mark.parametrize(("embedder", "problem"), [
    ('{ provider: anthropic, model: claude-x, api_key: "k" }',
     "refunds.tamesu.yaml:12:95: tests[0].assert[0].similar_to.embedding_model: models.vectors is an anthropic "
     "model, and Anthropic's API has no embeddings: name an openai, azure or fake model"),
])
def test_a_model_without_embeddings_is_refused_where_it_is_named(tmp_path: Path, embedder: str,
                                                                  problem: str) -> None:
    _suite(tmp_path, "http://127.0.0.1:9/v1", embedder)
    done = run_tamesu(["validate", "refunds.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2 and problem in done.stderr + done.stdout, done.stdout + done.stderr


def test_the_fake_providers_vectors_count_shared_words(tmp_path: Path) -> None:
    (tmp_path / "offline.tamesu.yaml").write_text("""
targets:
  agent: { type: model, model: agent, system: "echo" }
models:
  agent: { provider: fake, rules: [ { when: "money", say: "Your refund is on its way to you" },
                                    { when: "Hi", say: "Good morning" } ] }
  vectors: { provider: fake }
tests:
  - name: shared words
    scenario: { script: [ { say: "my money?" } ] }
    assert: [ { similar_to: { value: "your refund is on its way", method: embedding, embedding_model: vectors } } ]
  - name: no shared words
    scenario: { script: [ { say: "Hi" } ] }
    assert: [ { similar_to: { value: "your refund is on its way", method: embedding, embedding_model: vectors } } ]
""")
    done = run_tamesu(["run", "offline.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    results = _results(tmp_path / "out")
    assert {test: row["status"] for test, row in results.items()} == {
        "shared words": "passed", "no shared words": "failed"}, done.stdout + done.stderr
