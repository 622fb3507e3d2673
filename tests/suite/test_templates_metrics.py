"""Templates, secrets and metric arithmetic: the small pieces every run leans on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tamesu.conversation import AgentTurn, Exchange, UserTurn
from tamesu.engine.metrics import from_exchanges, percentile
from tamesu.errors import TemplateError
from tamesu.suite.secrets import Secrets, read_dotenv
from tamesu.suite.templates import Context, references, render_partial


def test_render_keeps_types_for_a_whole_template_and_joins_text_otherwise() -> None:
    context = Context(vars={"n": 3, "city": "Lisbon"}, captured={"order": {"id": "ORD-1"}})
    assert context.render("{{vars.n}}") == 3
    assert context.render("{{ vars.city }} has {{vars.n}} days") == "Lisbon has 3 days"
    assert context.render("{{captured.order.id}}") == "ORD-1"
    assert context.render_value({"a": ["{{vars.city}}"]}) == {"a": ["Lisbon"]}


def test_render_fails_loudly_on_a_missing_value() -> None:
    with pytest.raises(TemplateError, match=r"\{\{captured.rma\}\} has no value"):
        Context(captured={}).render("RMA {{captured.rma}}")
    with pytest.raises(TemplateError, match="not available here"):
        Context(vars={}).render("{{listen.url}}")


def test_bare_root_and_callable_namespaces() -> None:
    context = Context(session={"": "abc", "token": "t1"}, secrets=lambda name: name.lower())
    assert context.render("{{session}}/{{session.token}}") == "abc/t1"
    assert context.render("{{secrets.KEY}}") == "key"


def test_references_find_every_problem() -> None:
    found = dict(references("{{vars.a}} {{nope.b}} {{bad name}} {{"))
    assert found["vars.a"] == ""
    assert "unknown namespace 'nope'" in found["nope.b"]
    assert "expected a name" in found["bad name"]
    assert found[""] == "bad template: '{{' without a matching '}}'"


def test_render_partial_leaves_run_time_namespaces_alone() -> None:
    rendered = render_partial({"say": "order {{vars.id}} then {{captured.rma}}"}, {"vars": {"id": 7}})
    assert rendered == {"say": "order 7 then {{captured.rma}}"}


def test_secrets_come_from_environment_then_dotenv_and_are_masked(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("# comment\nexport API_KEY='sk-from-file'\nOTHER=plain value # note\n", encoding="utf-8")
    assert read_dotenv(env_file) == {"API_KEY": "sk-from-file", "OTHER": "plain value"}
    secrets = Secrets([env_file], environ={"API_KEY": "sk-from-env"})
    assert secrets("API_KEY") == "sk-from-env"
    assert secrets("OTHER") == "plain value"
    assert secrets.redactor.text("key sk-from-env, other plain value") == "key ***, other ***"
    assert secrets.redactor.data({"h": ["Bearer sk-from-env"]}) == {"h": ["Bearer ***"]}
    with pytest.raises(TemplateError):
        secrets("MISSING")


def test_percentiles_interpolate_between_ranks() -> None:
    values = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert percentile(values, 50) == 30.0
    assert percentile(values, 95) == pytest.approx(48.0)
    assert percentile([7.0], 99) == 7.0


def test_metrics_from_turn_timestamps() -> None:
    turns = [
        AgentTurn(sent_at_ms=0, completed_at_ms=100, first_token_at_ms=20),
        AgentTurn(sent_at_ms=200, completed_at_ms=500),
        AgentTurn(sent_at_ms=600, completed_at_ms=800, first_token_at_ms=650),
    ]
    metrics = from_exchanges([Exchange(i, UserTurn(text="hi"), t) for i, t in enumerate(turns, 1)],
                             {"rest_requests": 3})
    assert metrics["turns"] == 3
    assert metrics["turn_latency_ms"] == 300  # the plain name is the worst turn
    assert metrics["turn_latency_ms_p50"] == 200
    assert metrics["turn_latency_ms_p90"] == pytest.approx(280)
    assert metrics["time_to_first_token_ms_mean"] == 35
    assert metrics["rest_requests"] == 3
    assert "time_to_first_audio_ms" not in metrics
    standard = metrics.standard()
    assert standard["turn_latency_ms_p95"] == pytest.approx(290)
    assert "turn_latency_ms_p90" not in standard


def test_a_turn_no_user_turn_asked_for_is_not_an_answer_time() -> None:
    # a voice agent's greeting (sent_at: the call's start) read as the slowest "answer" of a run, and a
    # `wait_for` listening on as another, though no user turn waited for either
    greeting = AgentTurn(sent_at_ms=0, first_token_at_ms=2500, completed_at_ms=6000,
                         measures={"time_to_first_audio_ms": 2500, "interruption_stop_ms": 300})
    reply = AgentTurn(sent_at_ms=7000, first_token_at_ms=7400, completed_at_ms=8000,
                      measures={"time_to_first_audio_ms": 400})
    heard_more = AgentTurn(sent_at_ms=8000, first_token_at_ms=9900, completed_at_ms=12000)
    metrics = from_exchanges([Exchange(1, None, greeting), Exchange(2, UserTurn(text="hi"), reply),
                              Exchange(3, None, heard_more)], {})
    assert metrics["turns"] == 3
    assert metrics["turn_latency_ms"] == 1000 and metrics["time_to_first_token_ms"] == 400
    assert metrics["time_to_first_audio_ms_max"] == 400
    assert metrics["interruption_stop_ms"] == 300  # a greeting talked over still measures its stop


def test_double_quoted_dotenv_values_read_their_escapes(tmp_path: Path) -> None:
    # `A="ab\"cd"` was read as `ab\"cd`: tamesu sent (and masked) another value than the agent, started from the
    # same file by bash or python-dotenv, expected. `\n` between double quotes is a line break as python-dotenv
    # and node's dotenv read it (bash keeps the two characters)
    import subprocess

    env_file = tmp_path / ".env"
    env_file.write_text('A="ab\\"cd12345"\nB="line1\\nline2"  # two lines\nC=\'x\\ny\'\nD="a\\\\b"\n'
                        'E="unterminated\n', encoding="utf-8")
    read = read_dotenv(env_file)
    assert read == {"A": 'ab"cd12345', "B": "line1\nline2", "C": "x\\ny", "D": "a\\b", "E": '"unterminated'}
    script = f"set -a; . {env_file} 2>/dev/null; printf '%s\\0' \"$A\" \"$C\" \"$D\""
    by_bash = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=10).stdout
    assert by_bash.split("\0")[:-1] == [read["A"], read["C"], read["D"]]
