"""`traces: false` in a suite: a project whose tamesu.yaml receives traces, and a suite whose agent is not traced."""

from __future__ import annotations

from pathlib import Path

from agents.traced import TracedRestAgent, free_port
from ports import refused_port


def _project(tmp_path: Path, url: str, suite_traces: str, extra_assert: str = "") -> None:
    receive = f"127.0.0.1:{free_port()}"
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['suite.yaml']\ntraces: {{ receive: '{receive}', wait: 200ms }}\n")
    (tmp_path / "suite.yaml").write_text(f"""\
{suite_traces}
targets:
  shop: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }} }}
tests:
  - name: order
    target: shop
    scenario: {{ script: [ {{ say: 'Where is ORD-1001?' }} ] }}
    assert:
      - {{ not_contains: Traceback }}
{extra_assert}""")


def test_a_suite_that_says_traces_false_is_not_traced_in_a_traced_project(tmp_path: Path, tamesu, serve) -> None:
    # the agent's exporter points nowhere: traced, its run would say its trace never came
    url = serve(TracedRestAgent(f"http://127.0.0.1:{refused_port()}", encoding="json").app()).url
    _project(tmp_path, url, "")
    inherited = tamesu(["run", "--out", "out"], cwd=tmp_path)
    assert inherited.returncode == 0, inherited.stdout + inherited.stderr
    assert "never came" in inherited.stdout, inherited.stdout

    _project(tmp_path, url, "traces: false")
    result = tamesu(["run", "--out", "out2"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "never came" not in result.stdout and "traces:" not in result.stdout, result.stdout
    folder = next((tmp_path / "out2").iterdir()) / "suite" / "order" / "run-1"
    assert not (folder / "spans.json").exists()


def test_a_span_assertion_in_a_suite_without_traces_is_the_suites_problem(tmp_path: Path, tamesu, serve) -> None:
    url = serve(TracedRestAgent(f"http://127.0.0.1:{refused_port()}", encoding="json").app()).url
    _project(tmp_path, url, "traces: false", "      - { span: { status: error, count: { equals: 0 } } }\n")
    result = tamesu(["validate"], cwd=tmp_path)
    assert "no `traces:` receives them" in result.stdout + result.stderr, result.stdout + result.stderr
