"""An assertion that reads what its test's target never gives (the Concepts page's table: `status` on rest,
`dtmf_received` on sip and livekit, `call_ended_by` and `transferred_to` on sip, `handoff` where a handoff
signal is declared): validate warns where it is written, and each run is an error (exit 2, fault
`suite`: it was exit 3, fault `environment`, the infrastructure's). Before, validate said ok and every run
failed blamed on the agent (exit 1), and `handoff: false` on a target with no signal passed whatever the agent
did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import run_tamesu

_SUITE = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop, system: "You are a shop assistant" }
  desk: { type: model, model: shop, system: "You are a help desk", handoff: { regex: "(?i)a colleague" } }
defaults:
  assert:
    - status: 200
tests:
  - name: phone checks on a chat
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - dtmf_received: "12"
      - call_ended_by: agent
      - transferred_to: { matches: "^sip:" }
      - handoff: false
  - name: a declared signal
    target: desk
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - handoff: false
"""


def test_an_assertion_its_target_never_gives_is_warned_and_an_error(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: s.tamesu.yaml:")] == [
        "warning: s.tamesu.yaml:14:24: tests[0].assert[0].dtmf_received: needs the digits the agent sends on the "
        "line, which model target shop never hears: every run of the test is an error",
        "warning: s.tamesu.yaml:15:24: tests[0].assert[1].call_ended_by: needs a phone call, which model target "
        "shop never makes: every run of the test is an error",
        "warning: s.tamesu.yaml:16:25: tests[0].assert[2].transferred_to: needs a phone call, which model target "
        "shop never makes: every run of the test is an error",
        "warning: s.tamesu.yaml:17:18: tests[0].assert[3].handoff: needs a handoff signal, which model target shop "
        "never gives: declare one with the target's `handoff:` (a json_path or regex): every run of the test is an "
        "error",
        "warning: s.tamesu.yaml:8:15: defaults.assert[0].status: needs an HTTP status on each turn, which model "
        "target desk never gives: every run of its tests is an error",
        "warning: s.tamesu.yaml:8:15: defaults.assert[0].status: needs an HTTP status on each turn, which model "
        "target shop never gives: every run of its tests is an error",
    ], done.stderr

    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    records = {r["test"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {name: (r["status"], r["runs"][0]["fault"]) for name, r in records.items()} == {
        "phone checks on a chat": ("error", "suite"), "a declared signal": ("error", "suite")}
    result = json.loads((run_dir / records["phone checks on a chat"]["runs"][0]["dir"] / "result.json").read_text())
    assert result["error"] == "defaults/status: needs an HTTP status on each turn, which model target shop never gives"
    graded = {a["name"]: (a["passed"], a["reason"]) for a in result["assertions"]}
    assert graded["handoff"] == (False, "not decided: needs a handoff signal, which model target shop never gives: "
                                        "declare one with the target's `handoff:` (a json_path or regex)")
    # the target that declares a signal grades handoff: only the default status is what it cannot give
    declared = json.loads((run_dir / records["a declared signal"]["runs"][0]["dir"] / "result.json").read_text())
    assert {a["name"]: a["passed"] for a in declared["assertions"]} == {"defaults/status": False, "handoff": True}


_METRICS = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop }
defaults:
  slo: { time_to_first_audio_ms_p95: 1500 }
tests:
  - name: audio metrics of a chat
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: time_to_first_audio_ms_p95, lt: 1500 }
      - metric: { name: call_setup_ms, lt: 3000 }
      - metric: { name: turns, equals: 1 }
"""


def test_a_metric_its_target_never_measures_is_warned_and_an_error_but_an_slo_passes(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_METRICS)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: s.tamesu.yaml:")] == [
        "warning: s.tamesu.yaml:12:17: tests[0].assert[0].metric: time_to_first_audio_ms_p95 is measured only in "
        "audio, which model target shop does not speak: every run of the test is an error",
        "warning: s.tamesu.yaml:13:17: tests[0].assert[1].metric: call_setup_ms is measured only on a phone call, "
        "which model target shop never makes: every run of the test is an error",
    ], done.stderr
    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "audio-metrics-of-a-chat" / "run-1" / "result.json").read_text())
    assert (result["status"], result["fault"]) == ("error", "suite")
    # the metric it measures is graded; a metric the test does not measure passes its SLO, as Concepts says
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == [
        ("assert[0]/metric", False), ("assert[1]/metric", False), ("assert[2]/metric", True),
        ("slo/time_to_first_audio_ms_p95", True)]
    assert result["error"] == ("assert[0]/metric: time_to_first_audio_ms_p95 is measured only in audio, which model "
                               "target shop does not speak")


_BROKEN_FIRST = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop, system: "You are a shop assistant" }
tests:
  - name: a broken assertion before the warned ones
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - turns: { equals: null }
      - contains: Hi
      - { contains: there, on_turn: 3 }
      - dtmf_received: "12"
"""


def test_a_warning_after_a_broken_assertion_names_its_own_place(tmp_path: Path) -> None:
    # before: the broken first entry was left out of the parsed list, so the on_turn warning named assert[1]
    # (line 11, `contains: Hi`) and the dtmf one assert[2].dtmf_received, an entry that is a `contains`
    (tmp_path / "s.tamesu.yaml").write_text(_BROKEN_FIRST)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert "s.tamesu.yaml:10:26: tests[0].assert[0].turns.equals: expected a number of turns, not null" in lines
    written = {0: "turns", 1: "contains", 2: "contains", 3: "dtmf_received"}
    for line in lines:
        if line.startswith("warning: s.tamesu.yaml:") and ".assert[" in line:
            index = int(line.split(".assert[", 1)[1].split("]", 1)[0])
            said = line.split(f".assert[{index}].", 1)[1].split(":", 1)[0]
            assert said in ("on_turn", written[index]) and (said != "on_turn" or index == 2), line
            assert line.split(":")[2] == str(10 + index), line


_THE_HAND_KEPT_LIST = {
    **dict.fromkeys(("time_to_first_audio_ms", "interruption_stop_ms", "talk_over_ratio", "silence_gap_max_ms",
                     "stt_word_error_rate", "greeting_ms"), "speaks_audio"),
    **dict.fromkeys(("call_setup_ms", "ring_ms", "call_duration_ms"), "phone_call"),
    **dict.fromkeys(("goal_steps", "goal_steps_total", "browser_steps"), "takes_steps"),
}
"""What `plan._fit` kept by hand before it read the target types' declarations (`Target.metric_names`)."""


def test_what_a_metric_needs_is_read_from_what_the_target_types_declare() -> None:
    from tamesu import targets
    from tamesu.plan._slo_names import metric_needs

    needs = metric_needs()
    # every metric the hand-kept list had is still checked, for the same reason
    assert {name: needs.get(name) for name in _THE_HAND_KEPT_LIST} == _THE_HAND_KEPT_LIST
    # and none a type declares is refused on it: the type does what the metric needs (pipecat's and livekit's text
    # mode aside, which `offers` tells from the spec)
    refused = [(kind, name, need) for kind, names in targets.declared_metrics().items() for name in names
               if (need := needs.get(name)) is not None
               and not getattr(targets.target_class(kind), "audio" if need == "speaks_audio" else need)]
    assert refused == []
    # what the hand-kept list missed: every audio call's pace and speech, the browser's blocked requests (a
    # target's counters are not: pipecat counts its messages in text mode too)
    assert [needs.get(name) for name in ("frame_late_ms_p99", "agent_speech_ms", "voice_clears")] == [
        "speaks_audio", "speaks_audio", None]
    assert needs.get("browser_blocked") == "takes_steps" and needs.get("model_calls") is None


_LIVEKIT_METRICS = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop }
  room: { type: livekit, url: "ws://127.0.0.1:9", api_key: k, api_secret: s, room: r, mode: audio }
tests:
  - name: a call
    target: room
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: interruption_stop_ms_max, lt: 1500 }
      - metric: { name: frame_late_ms_p99, lt: 60 }
  - name: a chat
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: frame_late_ms_p99, lt: 60 }
"""


def test_a_metric_of_another_audio_target_is_warned_on_one_that_never_measures_it(tmp_path: Path) -> None:
    # before: validate said ok to both, and every run failed them as not measured, the agent's failure
    (tmp_path / "s.tamesu.yaml").write_text(_LIVEKIT_METRICS)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: s.tamesu.yaml:")] == [
        "warning: s.tamesu.yaml:11:17: tests[0].assert[0].metric: interruption_stop_ms_max is measured only by the "
        "pipecat, realtime, sip, twilio and voice targets, not by livekit target room: the persona never talks over "
        "its agent (interrupt_probability has no effect on it): every run of the test is an error",
        "warning: s.tamesu.yaml:17:17: tests[1].assert[0].metric: frame_late_ms_p99 is measured only in audio, which "
        "model target shop does not speak: every run of the test is an error",
    ], done.stderr


_MISSPELT = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop }
tests:
  - name: a misspelt metric
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: turn_latncy_ms_p95, lt: 1500 }
      - metric: { name: turn_latncy_ms_p95, lt: 1500, missing: pass }
      - metric: { name: turn_latency_ms_p95, lt: 60000 }
      - metric: { name: time_to_first_audio_ms, lt: 1500, missing: pass }
"""


def test_a_metric_no_target_type_measures_is_warned_and_an_error_of_the_suite(tmp_path: Path) -> None:
    # before: validate said ok, and every run failed "turn_latncy_ms_p95 was not measured" as the agent's fault
    # (exit 1), or, `missing: pass`, passed it unchecked
    (tmp_path / "s.tamesu.yaml").write_text(_MISSPELT)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    why = ("turn_latncy_ms_p95 is measured by no run of model target shop, nor by any other target type: did you "
           "mean turn_latency_ms_p95? (a distribution takes _pNN, _max, _min, _mean)")
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: s.tamesu.yaml:")] == [
        f"warning: s.tamesu.yaml:10:17: tests[0].assert[0].metric: {why}: every run of the test is an error",
        f"warning: s.tamesu.yaml:11:17: tests[0].assert[1].metric: {why}: every run of the test is an error",
    ], done.stderr
    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    result = json.loads((run_dir / "s" / "a-misspelt-metric" / "run-1" / "result.json").read_text())
    assert (result["status"], result["fault"], result["error"]) == ("error", "suite", f"assert[0]/metric: {why}")
    # the name it meant is graded; another type's metric with `missing: pass` passes a chat, as an SLO does
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == [
        ("assert[0]/metric", False), ("assert[1]/metric", False), ("assert[2]/metric", True),
        ("assert[3]/metric", True)]


_COUNTERS = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop }
  api: { type: rest, url: "http://127.0.0.1:9/chat" }
  desk: { type: a2a, url: "http://127.0.0.1:9/a2a" }
  bot: { type: pipecat, url: "ws://127.0.0.1:9/ws", mode: text }
tests:
  - name: counters of a call on a chat
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: voice_clears, lte: 3 }
      - metric: { name: twilio_marks, gte: 1 }
      - metric: { name: model_calls, equals: 1 }
      - metric: { name: voice_clears, lte: 3, missing: pass }
      - metric: { name: model_calls_max, lte: 3 }
  - name: another protocol's counters
    target: api
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: a2a_tasks, gte: 1 }
      - metric: { name: voice_marks, gte: 1 }
  - name: a call's counter on a text pipeline
    target: bot
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: voice_messages, gte: 1 }
      - metric: { name: pipecat_messages, gte: 1 }
  - name: the counterpart counts it
    target: shop
    counterpart: { target: api, opening: "hello" }
    assert:
      - metric: { name: rest_requests, gte: 1 }
"""


def test_a_counter_only_other_target_types_measure_is_warned_naming_them_and_an_error(tmp_path: Path) -> None:
    # before: validate said ok (they need nothing a target may lack: audio, a call, steps) and each run failed
    # "voice_clears was not measured", as if the agent had not done something
    (tmp_path / "s.tamesu.yaml").write_text(_COUNTERS)
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: s.tamesu.yaml:")] == [
        "warning: s.tamesu.yaml:13:17: tests[0].assert[0].metric: voice_clears is measured only by the voice target, "
        "not by model target shop: every run of the test is an error",
        "warning: s.tamesu.yaml:14:17: tests[0].assert[1].metric: twilio_marks is measured only by the twilio target, "
        "not by model target shop: every run of the test is an error",
        "warning: s.tamesu.yaml:17:17: tests[0].assert[4].metric: model_calls_max is measured by no run of model "
        "target shop, nor by any other target type: did you mean model_calls? (model_calls is one number: it takes "
        "no _max): every run of the test is an error",
        "warning: s.tamesu.yaml:22:17: tests[1].assert[0].metric: a2a_tasks is measured only by the a2a target, not "
        "by rest target api: every run of the test is an error",
        "warning: s.tamesu.yaml:23:17: tests[1].assert[1].metric: voice_marks is measured only by the voice target, "
        "not by rest target api: every run of the test is an error",
        "warning: s.tamesu.yaml:28:17: tests[2].assert[0].metric: voice_messages is measured only by the voice "
        "target, not by pipecat target bot: every run of the test is an error",
    ], done.stderr
    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--filter", "counters of a call"], cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    [result_file] = (tmp_path / "out").rglob("result.json")
    result = json.loads(result_file.read_text())
    assert (result["status"], result["fault"]) == ("error", "suite"), result
    assert result["error"] == ("assert[0]/metric: voice_clears is measured only by the voice target, not by model "
                               "target shop")
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == [
        ("assert[0]/metric", False), ("assert[1]/metric", False), ("assert[2]/metric", True),
        ("assert[3]/metric", True), ("assert[4]/metric", False)]


_FIRST_TOKEN = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi there" } ] }
targets:
  shop: { type: model, model: shop }
  plain: { type: rest, url: "URL/chat", streaming: none, response: { text: $.reply } }
  sniffed: { type: rest, url: "URL/chat", response: { text: $.reply } }
  streamed: { type: rest, url: "URL/chat", streaming: sse }
  sent: { type: a2a, url: "URL/a2a" }
defaults:
  slo: { time_to_first_token_ms_p95: 1500 }
tests:
  - name: a chat
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: time_to_first_token_ms, lt: 1500 }
      - metric: { name: turns, equals: 1 }
  - name: plain json
    target: plain
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: time_to_first_token_ms_p95, lt: 1500 }
  - name: a sniffed answer
    target: sniffed
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: time_to_first_token_ms_max, lt: 1500 }
  - name: streams
    target: streamed
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: time_to_first_token_ms, lt: 1500 }
  - name: a2a send
    target: sent
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - metric: { name: time_to_first_token_ms, lt: 1500 }
"""


def _plain_agent() -> object:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"reply": f"you said {(await request.json())['message']}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def test_a_first_token_on_a_target_whose_replies_come_whole_is_the_suites_not_the_agents(
        tmp_path: Path, serve: Any) -> None:
    # before: validate said ok and each run failed "time_to_first_token_ms was not measured", fault agent: a model
    # answer, rest's `streaming: none` and A2A's message/send have no first token whatever the agent does
    url = serve(_plain_agent()).url
    (tmp_path / "s.tamesu.yaml").write_text(_FIRST_TOKEN.replace("URL", url))
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    whole = "its replies come whole, so they have no first token: every run of the test is an error"
    assert [line for line in done.stderr.splitlines() if line.startswith("warning: s.tamesu.yaml:")] == [
        "warning: s.tamesu.yaml:16:17: tests[0].assert[0].metric: time_to_first_token_ms is measured only where the "
        f"agent's reply streams (its first words before the rest), which model target shop never does: {whole}",
        "warning: s.tamesu.yaml:22:17: tests[1].assert[0].metric: time_to_first_token_ms_p95 is measured only where "
        f"the agent's reply streams (its first words before the rest), which rest target plain never does: {whole}",
        "warning: s.tamesu.yaml:37:17: tests[4].assert[0].metric: time_to_first_token_ms is measured only where the "
        f"agent's reply streams (its first words before the rest), which a2a target sent never does: {whole}",
    ], done.stderr

    ran = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--filter", "a chat|plain json|a sniffed answer"],
                     cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    [run_dir] = list((tmp_path / "out").iterdir())
    records = {r["test"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {name: (r["status"], r["runs"][0]["fault"]) for name, r in records.items()} == {
        "a chat": ("error", "suite"), "plain json": ("error", "suite"), "a sniffed answer": ("error", "suite")}
    result = json.loads((run_dir / records["a chat"]["runs"][0]["dir"] / "result.json").read_text())
    # the SLO passes where its metric is not measured, as Concepts says; `turns` is graded
    assert [(a["name"], a["passed"]) for a in result["assertions"]] == [
        ("assert[0]/metric", False), ("assert[1]/metric", True), ("slo/time_to_first_token_ms_p95", True)]
    # `streaming` not set: validate cannot know, and the agent answered plain JSON: said at the run, not blamed
    sniffed = json.loads((run_dir / records["a sniffed answer"]["runs"][0]["dir"] / "result.json").read_text())
    assert sniffed["error"] == (
        "metric: time_to_first_token_ms_max was not measured: this agent's replies came whole, not streamed, so "
        "there is no first token to time"), sniffed
