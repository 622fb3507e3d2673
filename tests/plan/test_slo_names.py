"""`defaults.slo` names no run could measure, said where written: an SLO passes a test that does not measure its
metric, so a misspelt one passed every test, and only a warning at the run's end said so."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

_SUITE = """\
models:
  shop: {{ provider: fake, rules: [ {{ when: "(?i)hello", say: "Hi there" }} ] }}
targets:
  shop: {{ type: model, model: shop }}
  call: {{ type: voice, url: "ws://127.0.0.1:9/x" }}
defaults:
  slo: {{ {slo} }}
tests:
  - {{ name: chat, target: {target}, scenario: {{ script: [ {{ say: hello }} ] }} }}
"""


def _validate(tmp_path: Path, slo: str, target: str = "shop", project: str = "") -> tuple[int, str]:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(slo=slo, target=target))
    (tmp_path / "tamesu.yaml").write_text(project)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    return done.returncode, done.stdout + done.stderr


def test_a_misspelt_slo_is_said_where_written(tmp_path: Path) -> None:
    # before: validate said ok; the run passed every test and warned at its end
    code, said = _validate(tmp_path, "turn_latncy_ms_p95: 2000, ttft_p95: 1500, turn_latency_ms_p95: 2000")
    assert code == 2, said
    assert ("s.tamesu.yaml:7:10: defaults.slo.turn_latncy_ms_p95: turn_latncy_ms_p95 is measured by no run of this "
            "suite's model target, nor by any other target type, so this SLO would pass every test unchecked: did "
            "you mean turn_latency_ms_p95?") in said, said
    assert ("defaults.slo.ttft_p95: ttft_p95 is measured by no run of this suite's model target, nor by any other "
            "target type, so this SLO would pass every test unchecked: the metrics: turns, turn_latency_ms, "
            "time_to_first_token_ms, ") in said, said
    assert ", model_calls, tool_arguments_invalid, and with traces: the agent's span metrics" in said, said
    assert said.count("s.tamesu.yaml:") == 2, said


def test_a_metric_another_target_type_measures_still_passes_a_test_that_does_not(tmp_path: Path) -> None:
    # as Concepts says: an audio SLO on a text test passes it (the end-of-run warning says none measured it)
    # (model_calls_max was here: a statistic of a count, which no run measures, so it passed every test unchecked)
    code, said = _validate(tmp_path, "time_to_first_audio_ms_p95: 1500, rest_requests: 3, llm_time_ms_total: 9, "
                                     "model_calls: 2")
    assert code == 0, said


def test_a_misspelt_slo_on_a_voice_suite_is_said_where_written(tmp_path: Path) -> None:
    # before: a voice target declared no metrics, so its suite's SLOs were left to the run's end: validate said ok
    code, said = _validate(tmp_path, "time_to_first_audo_ms_p95: 1500", target="call")
    assert code == 2, said
    assert said.splitlines()[0] == (
        "s.tamesu.yaml:7:10: defaults.slo.time_to_first_audo_ms_p95: time_to_first_audo_ms_p95 is measured by no "
        "run of this suite's voice target, nor by any other target type, so this SLO would pass every test "
        "unchecked: did you mean time_to_first_audio_ms_p95? (a distribution takes _pNN, _max, _min, _mean)"), said
    assert said.count("s.tamesu.yaml:") == 1, said


def test_a_voice_suites_own_metrics_validate(tmp_path: Path) -> None:
    # each of the voice target's kinds: a turn's measure, a call's, its counter, the call's pace, the greeting's
    slo = ("time_to_first_audio_ms_p95: 1500, talk_over_ratio: 0.2, voice_clears: 3, frame_late_ms_p99: 20, "
           "greeting_ms: 3000, turn_latency_ms_p95: 4000")
    code, said = _validate(tmp_path, slo, target="call")
    assert code == 0, said


def test_a_statistic_an_audio_call_does_not_record_is_said_with_the_ones_it_does(tmp_path: Path) -> None:
    # frame_late_ms is recorded as three figures, no distribution: its _p95 passed every test unchecked
    code, said = _validate(tmp_path, "frame_late_ms_p95: 20", target="call")
    assert code == 2, said
    assert ("frame_late_ms_p95 is measured by no run of this suite's voice target, nor by any other target type, so "
            "this SLO would pass every test unchecked: did you mean frame_late_ms_p99? (frame_late_ms is recorded as "
            "_max, _p50, _p99 only)") in said, said


def test_a_misspelt_family_of_a_few_statistics_is_said_as_that_family(tmp_path: Path) -> None:
    # before: the family's base misspelt was matched against plain names only: loop_lag_m_p99 suggested
    # loop_cpu_ms ("one number: it takes no _p99"), frame_lat_ms_p99 another type's barge_in_late_ms_p99
    for written, meant, recorded in [("loop_lag_m_p99", "loop_lag_ms_p99", "loop_lag_ms is recorded as _max, _p99"),
                                     ("frame_lat_ms_p99", "frame_late_ms_p99",
                                      "frame_late_ms is recorded as _max, _p50, _p99"),
                                     ("loop_lag_m", "loop_lag_ms_p99", "loop_lag_ms is recorded as _max, _p99")]:
        code, said = _validate(tmp_path, f"{written}: 20", target="call")
        assert code == 2, said
        assert said.splitlines()[0].endswith(f"{written}: {written} is measured by no run of this suite's voice "
                                             "target, nor by any other target type, so this SLO would pass every "
                                             f"test unchecked: did you mean {meant}? ({recorded} only)"), said


def test_the_projects_slo_is_said_in_tamesu_yaml(tmp_path: Path) -> None:
    code, said = _validate(tmp_path, "turns: 9", project="defaults:\n  slo: { turns_latency_ms: 100 }\n")
    assert code == 2, said
    assert ("tamesu.yaml:2:10: defaults.slo.turns_latency_ms: turns_latency_ms is measured by no run of any suite, "
            "nor by any other target type, so this SLO would pass every test unchecked: did you mean "
            "turn_latency_ms?") in said, said


def test_what_a_run_records_is_in_its_targets_declared_metrics(tmp_path: Path) -> None:
    # the vocabulary refuses an SLO before the run: a metric a declared target records that it does not name would
    # have an SLO on it refused, so what a real run records is held to it
    import json

    from tamesu import targets
    from tamesu.plan._slo_names import DISTRIBUTIONS, RUN_METRICS, measurable

    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(slo="turns: 9", target="shop"))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [result] = (tmp_path / "out").rglob("result.json")
    recorded = json.loads(result.read_text())["metrics"]
    declared = targets.target_class("model").metric_names
    assert declared is not None and "model_calls" in recorded, recorded
    assert [name for name in recorded if not measurable(name, RUN_METRICS | declared)] == [], recorded
    # and what it records as a distribution (its _p50, _p95, _max) is one the hints say takes a statistic
    assert {name.removesuffix("_p95") for name in recorded if name.endswith("_p95")} <= DISTRIBUTIONS, recorded


_OF_ANOTHER = ("time_to_first_audio_ms is measured only by the livekit, pipecat, realtime, sip, twilio and voice "
               "targets, not by this suite's model target")


def test_a_near_name_of_another_target_types_metric_is_suggested_as_theirs(tmp_path: Path) -> None:
    # before: the nearest name among the model target's own, "did you mean time_to_first_token_ms_p95?"
    code, said = _validate(tmp_path, "time_to_first_audo_ms_p95: 1500")
    assert code == 2, said
    line = ("s.tamesu.yaml:7:10: defaults.slo.time_to_first_audo_ms_p95: time_to_first_audo_ms_p95 is measured by "
            "no run of this suite's model target, nor by any other target type, so this SLO would pass every test "
            "unchecked: did you mean time_to_first_audio_ms_p95? (a distribution takes _pNN, _max, _min, _mean); "
            f"{_OF_ANOTHER}")
    assert said.splitlines()[0] == line, said
    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert ran.returncode == 2 and (ran.stdout + ran.stderr).splitlines()[0] == line, ran.stdout + ran.stderr
    # one no target type measures is still the nearest of the suite's own
    code, said = _validate(tmp_path, "turn_latncy_ms_p95: 2000")
    assert code == 2 and "did you mean turn_latency_ms_p95?" in said and "measured only by" not in said, said


def test_the_metrics_a_voice_suite_measures_are_said_whole(tmp_path: Path) -> None:
    # before: the line was cut at 600 characters, in the middle of the list ("loop_run...[273 more characters]...")
    code, said = _validate(tmp_path, "zzqq: 3", target="call")
    assert code == 2, said
    line = said.splitlines()[0]
    assert "more characters" not in line, line
    assert ", loop_runqueue_ms, " in line and line.endswith(
        "voice_messages, and with traces: the agent's span metrics (docs/traces.md)"), line


def test_what_a_distribution_takes_is_said_only_of_a_statistic_written_of_one(tmp_path: Path) -> None:
    # before: every hint ended "(a distribution takes _pNN, _max, _min, _mean)": after a name with no statistic
    # (zzqq, a misspelt turn_latency_ms) too, and after a counter suggested with the statistic it has not
    # ("did you mean voice_clears_max?", a name no run measures)
    def first(slo: str) -> str:
        code, said = _validate(tmp_path, slo, target="call")
        assert code == 2, said
        return said.splitlines()[0].split(" unchecked: ", 1)[1]

    assert first("turns_latncy_ms: 9") == "did you mean turn_latency_ms?"
    assert first("voice_clers_max: 3") == "did you mean voice_clears? (voice_clears is one number: it takes no _max)"
    assert first("greting_ms_p95: 3") == "did you mean greeting_ms? (greeting_ms is one number: it takes no _p95)"
    assert first("llm_time_m_p95: 3") == "did you mean llm_time_ms_p95? (a distribution takes _pNN, _max, _min, _mean)"
    assert first("ttft_p95: 3").endswith("(docs/traces.md) (a distribution takes _pNN, _max, _min, _mean)")
    # a statistic of one number is measured by no run (`engine.metrics`): it validated ok and passed every test
    assert first("voice_clears_max: 3") == "did you mean voice_clears? (voice_clears is one number: it takes no _max)"
    assert first("turns_p95: 3") == "did you mean turns? (turns is one number: it takes no _p95)"
    code, said = _validate(tmp_path, "turn_latency_ms_p90: 9, llm_time_ms_mean: 9, loop_lag_ms_max: 9", target="call")
    assert code == 0, said


def test_a_problem_past_its_bound_is_cut_at_a_word_saying_the_bound() -> None:
    from tamesu.errors import MESSAGE_CHARS, Problem

    message = "unknown name " + " ".join(f"word{n}" for n in range(1000)) + " here"
    shown = str(Problem("s.tamesu.yaml", 3, 5, "tests[0].name", message))
    head, rest = shown.removeprefix("s.tamesu.yaml:3:5: tests[0].name: ").split("...[", 1)
    cut, tail = rest.split("]...", 1)
    assert len(head) <= MESSAGE_CHARS and message.startswith(head + " ") and tail == "word999 here", shown
    more, bound = cut.split(" more characters: ")
    assert (int(more.replace(",", "")), bound) == (len(message) - len(head) - len(tail), "a line says 1,200"), cut


_LIVEKIT = """\
targets:
  room: {{ type: livekit, url: "ws://127.0.0.1:9", api_key: k, api_secret: s, room: r, mode: audio }}
defaults:
  slo: {{ {slo} }}
tests:
  - {{ name: call, target: room, scenario: {{ script: [ {{ say: hello }} ] }} }}
"""


def test_an_slo_on_a_barge_ins_stop_is_refused_on_a_target_that_never_talks_over_its_agent(tmp_path: Path) -> None:
    # before: validate said ok (other audio targets measure it) and every test passed the SLO unchecked
    (tmp_path / "s.tamesu.yaml").write_text(_LIVEKIT.format(slo="interruption_stop_ms_p95: 500, talk_over_ratio: 0.1"))
    (tmp_path / "tamesu.yaml").write_text("")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (done.stdout + done.stderr).splitlines()[0] == (
        "s.tamesu.yaml:4:10: defaults.slo.interruption_stop_ms_p95: interruption_stop_ms_p95 is measured by no run of "
        "this suite's livekit target, only by the pipecat, realtime, sip, twilio and voice targets, so this SLO would "
        "pass every test unchecked: the persona never talks over its agent (interrupt_probability has no effect on it)")
    assert (done.stdout + done.stderr).count("s.tamesu.yaml:") == 1
