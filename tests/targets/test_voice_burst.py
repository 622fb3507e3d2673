"""The `voice` target against an agent that sends its audio in bursts (tests/agents/burst_voice.py), through the
command: a greeting in one message and an answer sent all at once play on the playback clock and pass; with
`audio.paced: true` the burst fails saying so; a steady stream at twice real time names the sample rate; a reply
that never ends, in real time, fails its turn at `turn_timeout`, and one that never answers counts as long as
`turn_timeout` gave it; an agent that waits for the caller (`greeting: false`); only the replies something reads
during the call (a `wait_for`, a capture) are transcribed during it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.voice import needs_voice, starved
from conftest import run_tamesu, why

pytestmark = [pytest.mark.audio, needs_voice, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]

# the greetings' `wait_for` passes when the words are heard, so it may wait long at no cost: the run's four calls
# at once on a loaded machine share the speech workers that transcribe them (15 s, the default, failed the
# pipecat bot's menu in CI)
SUITE = """name: burst
targets:
  bot: { type: voice, url: "{{env.BOT}}/burst", turn_timeout: 20s }
  paced-bot: { type: voice, url: "{{env.BOT}}/burst", audio: { paced: true }, turn_timeout: 20s }
  wrong-rate: { type: voice, url: "{{env.BOT}}/paced", audio: { sample_rate: 8000 }, turn_timeout: 20s }
  flooder: { type: voice, url: "{{env.BOT}}/flood", turn_timeout: 2s }
  talker: { type: voice, url: "{{env.BOT}}/endless", turn_timeout: 4s, idle: 1s }
  bridge: { type: voice, url: "{{env.BOT}}/line", turn_timeout: 20s, idle: 2s }
  paced-bridge: { type: voice, url: "{{env.BOT}}/line", audio: { paced: true }, turn_timeout: 20s, idle: 2s }
  hum: { type: voice, url: "{{env.BOT}}/hum", turn_timeout: 3s }
  # 6 s: its greeting (some 2.5 s paced in real time, then the idle second) ended past 3 s in one CI run
  mute: { type: voice, url: "{{env.BOT}}/paced", turn_timeout: 6s }
  stops: { type: voice, url: "{{env.BOT}}/stops?after_ms=300", turn_timeout: 20s, idle: 1s }
  ignores: { type: voice, url: "{{env.BOT}}/stops?after_ms=-1", turn_timeout: 20s, idle: 1s }
  bakery: { type: voice, url: "{{env.BOT}}/burst", turn_timeout: 30s }
  listener: { type: voice, url: "{{env.BOT}}/listens", greeting: false, turn_timeout: 20s }
  quiet-first: { type: voice, url: "{{env.BOT}}/burst", greeting: false, turn_timeout: 20s }
# the long calls early (ignores 22-25 s, stops 17 s, the lines 11-14 s at load 5-7), four at once; ignores and
# stops not in the first wave: started with the run (its speech workers loading, four calls opening) the stop
# was measured 32 ms against the agent's own 339 ms in a CI run; started sixth and seventh they were the run's tail
tests:
  - name: paced-line
    target: paced-bridge
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 45s }, { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
  - name: line
    target: bridge
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 45s }, { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
  - name: mute
    target: mute
    scenario: { script: [ { say: "When do you open?" } ] }
  - name: nothing reads
    target: bakery
    scenario: { script: [ { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
  - name: burst
    target: bot
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 45s }, { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true } } ]
  - name: a capture reads both
    target: bakery
    capture: [ { name: hour, regex: "(?i)\\\\bat (\\\\w+)" } ]
    scenario: { script: [ { say: "When do you open?" } ] }
  - name: ignores
    target: ignores
    persona: { behaviors: { interrupt_probability: 1 } }
    scenario: { script: [ { say: "When do you open?" }, { say: "Sorry, when do you open tomorrow morning?" } ] }
  - name: stops
    target: stops
    persona: { behaviors: { interrupt_probability: 1 } }
    scenario: { script: [ { say: "When do you open?" }, { say: "Sorry, when do you open tomorrow morning?" } ] }
  - name: paced
    target: paced-bot
    scenario: { script: [ { say: "When do you open?" } ] }
  - name: endless
    target: talker
    scenario: { script: [ { say: "hello" } ] }
  - name: listens
    target: listener
    scenario: { script: [ { say: "When do you open?" } ] }
    assert: [ { contains: { value: morning, ignore_case: true }, on_turn: 1 } ]
  - name: in the greeting
    target: bot
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 2s }, { say: "When do you open?" } ] }
  - name: listening on
    target: quiet-first
    scenario: { script: [ { wait_for: "welcome to the bakery", timeout: 2s }, { say: "When do you open?" } ] }
  - name: rate
    target: wrong-rate
    scenario: { script: [ { say: "hello" } ] }
  - name: hum
    target: hum
    scenario: { script: [ { say: "hello" } ] }
  - name: flood
    target: flooder
    scenario: { script: [ { say: "hello" } ] }
"""


STOPS: list[float] = []
"""The `/stops` agent's own stops: ms from the caller's first loud frame over its answer to its last frame."""
SAID: list[str] = []
"""The run's console output."""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, dict[str, Any]]]]:
    from agents.burst_voice import BurstVoiceAgent

    agent = BurstVoiceAgent()
    project = tmp_path_factory.mktemp("voice-burst")
    (project / "burst.tamesu.yaml").write_text(SUITE)
    try:
        # the calls at once (each a connection of its own to the agent): at two of three, the third waited for a
        # slot and the run took 20.7 s; at three 10.8 s (load 4)
        done = run_tamesu(["run", "--out", "out", "--parallel", "4"], cwd=project,
                          env={"BOT": agent.url, "TAMESU_STORE": "off"}, timeout=300)
    finally:
        agent.stop()
    STOPS.extend(agent.stops)
    SAID.append(done.stdout)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    run_dir = next(d for d in (project / "out").iterdir() if d.is_dir())
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    yield run_dir, {r["test"]: r for r in map(json.loads, lines)}


def _alone(tmp_path: Path, test: str) -> dict[str, Any]:
    """The burst suite's `test` run again by itself, against an agent of its own: its record."""
    from agents.burst_voice import BurstVoiceAgent

    agent = BurstVoiceAgent()
    (tmp_path / "burst.tamesu.yaml").write_text(SUITE)
    try:
        done = run_tamesu(["run", "--out", "out", "--filter", f"^burst/{test}$"], cwd=tmp_path,
                          env={"BOT": agent.url, "TAMESU_STORE": "off"}, timeout=120)
    finally:
        agent.stop()
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    run_dir = next(d for d in (tmp_path / "out").iterdir() if d.is_dir())
    [record] = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    return dict(record)


def test_audio_that_never_ends_is_read_no_further_than_three_turn_timeouts(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: read until turn_timeout, every byte kept: 14,296 s of audio in 8.6 s, 5.6 GB of memory, a 915 MB
    # audio.wav, for one agent whose audio never ended
    run_dir, results = run
    flooded = results["flood"]
    assert flooded["status"] == "failed", why(flooded)
    assert "more than 3 times turn_timeout (2s): read no further" in why(flooded), why(flooded)
    wav = run_dir / "burst" / "flood" / "run-1" / "audio.wav"
    assert not wav.exists() or wav.stat().st_size < 20_000_000


def test_a_reply_still_going_on_at_turn_timeout_fails_the_turn(run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: the turn was cut at turn_timeout and taken as the reply: an agent that never stops talking passed
    _run_dir, results = run
    endless = results["endless"]
    assert endless["status"] == "failed", why(endless)
    assert ("the agent's reply did not end within turn_timeout (4s): it was still talking then, never 1s silent (idle)"
            in why(endless)), why(endless)


def test_an_agent_that_streams_silence_between_replies_is_timed_from_its_words(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # a phone bridge sends frames for the whole call, digital silence between replies: the reply was timed from
    # its first silent frame (time to first audio 8 ms for an 800 ms wait), and the silence after it, until the
    # turn ended, counted as a gap in it
    from agents.burst_voice import LINE_DELAY_S

    run_dir, results = run
    assert results["line"]["status"] == "passed", why(results["line"])
    result = json.loads((run_dir / "burst" / "line" / "run-1" / "result.json").read_text())
    waited = result["turns"][-1]["agent"]["measures"]["time_to_first_audio_ms"]
    # the agent hears the caller stop after 0.5 s of quiet, then waits LINE_DELAY_S
    assert 500 + LINE_DELAY_S * 1000 - 200 <= waited <= 6000, result["turns"][-1]["agent"]["measures"]
    # the longest silence is that wait, not the 2 s of silence the line carried after the answer (idle)
    assert abs(result["metrics"]["silence_gap_max_ms"] - waited) < 200, (result["metrics"], waited)


def test_a_turn_that_timed_out_counts_as_long_as_its_turn_timeout(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: from before the caller spoke to after the target gave up: 12.5 s for an 8 s turn_timeout
    run_dir, results = run
    assert "turn 2: the agent said nothing within turn_timeout (6s)" in why(results["mute"]), why(results["mute"])
    result = json.loads((run_dir / "burst" / "mute" / "run-1" / "result.json").read_text())
    assert result["metrics"]["turn_latency_ms"] == 6000.0, result["metrics"]


def test_an_agent_that_waits_for_the_caller_is_tested_with_greeting_false(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: no `greeting` key on voice: such an agent failed "turn 1 (the agent's greeting): the agent said
    # nothing within turn_timeout", the docs' only way
    run_dir, results = run
    assert results["listens"]["status"] == "passed", why(results["listens"])
    result = json.loads((run_dir / "burst" / "listens" / "run-1" / "result.json").read_text())
    assert [t["user"] is not None for t in result["turns"]] == [True], result["turns"]
    assert "greeting_ms" not in result["metrics"], result["metrics"]


def test_only_the_replies_read_during_the_call_are_transcribed_during_it(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    """An audio-socket call transcribes during the call only the replies something reads then (a script's
    `wait_for`, a capture): the others once the call is over, with the rest, not against the CPU of an agent that
    shares the machine. The /burst agent's greeting "Welcome to the bakery..." and its answer "We open at nine in
    the morning." Before, every reply was transcribed as its turn ended, read or not."""
    run_dir, records = run
    during_after = {}
    for name in ("nothing reads", "burst", "a capture reads both"):
        assert records[name]["status"] == "passed", why(records[name])
        folder = next((run_dir / "burst").glob(f"{name.replace(' ', '-')}/run-1"))
        result = json.loads((folder / "result.json").read_text())
        (audio,) = [e["data"] for e in result["events"] if e["name"] == "audio"]
        during_after[name] = (audio["transcribed_during_call"], audio["transcribed_after_call"])
        greeting, answer = [t["agent"]["text"].lower() for t in result["turns"]]
        # every reply has its words, read during the call or not: the greeting's and the answer's
        assert "bakery" in greeting and "morning" in answer, (name, greeting, answer)
        transcript = json.loads((folder / "transcript.json").read_text())
        heard = [line["heard"] for line in transcript["lines"] if line["role"] == "agent"]
        assert "bakery" in heard[0].lower() and "morning" in heard[1].lower(), (name, heard)
        if name == "a capture reads both":
            assert result["captured"]["hour"].lower() == "nine", result["captured"]
    # `burst` waits for the greeting's words
    assert during_after == {"nothing reads": (0, 2), "burst": (1, 1), "a capture reads both": (2, 0)}, during_after


def test_a_wait_ends_with_its_timeout_and_says_what_it_heard_but_did_not_transcribe(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    """A `wait_for` on an audio call ends with its timeout, the transcription of what it heard too: the agent's
    speech heard but not transcribed by then is said (a `transcription_cut` event, the step's line: not decided,
    exit 3, the phrase may be in it), and is in the record's `heard` once transcribed after the call. The /burst
    agent's greeting is 3 s of speech in one message: heard on the playback clock, it ends after a 2 s wait's
    timeout, however fast the machine; `burst` waits 45 s for it and passes. Before, the wait went on as long as
    the transcription took (a 45 s wait ended at 82 s at load 33, its greeting queued behind other calls'
    transcriptions). The SIP case: test_voice_wait_bound.py."""
    run_dir, records = run
    assert records["burst"]["status"] == "passed", why(records["burst"])
    for name in ("in the greeting", "listening on"):
        result = json.loads((run_dir / "burst" / name.replace(" ", "-") / "run-1" / "result.json").read_text())
        # not decided: the phrase may be in the speech not transcribed (the environment's, exit 3; not the agent's)
        assert (result["status"], result["fault"]) == ("error", "environment"), \
            (name, [t["agent"]["text"] for t in result["turns"]])
        reason = result["error"]
        # the greeting is 3 s of speech, heard out on the playback clock: past the 2 s wait, nothing of it was
        # transcribed by then; no turn was said (the step after the wait never came)
        assert reason.startswith('script step 1 waited 2s for "welcome to the bakery"; the agent said nothing ('), \
            reason
        assert reason.endswith("s of its speech was heard but not transcribed by then): not decided, the phrase may "
                               "be in what was not transcribed (tamesu's speech-to-text was behind: a loaded "
                               "machine? a longer timeout gives it time)"), reason
        (event,) = [e for e in result["events"] if e["name"] == "transcription_cut"]
        cut = event["data"]
        assert 1500 <= cut["heard_ms"] <= 5000, cut
        assert f"({cut['heard_ms'] / 1000:.1f}s of its speech" in reason, (reason, cut)
        (greeting,) = [t["agent"] for t in result["turns"]]
        assert greeting["text"] == "" and greeting["audio"]["untranscribed_ms"] == cut["heard_ms"], greeting
        # the record still has the words: transcribed once the call was over, for the transcript's `heard`
        assert "bakery" in (greeting["audio"]["agent_said"] or "").lower(), greeting["audio"]
        # the wait ended with its timeout and the utterance it had begun (3 s, then 1 s of quiet: idle), not
        # after a transcription
        assert event["at_ms"] - greeting["sent_at_ms"] < 2000 + 4000 + 1500, (event, greeting["sent_at_ms"])
    assert ("2 agent utterances heard but not transcribed in time (a wait_for's, or turn_timeout after they were "
            "heard out)") in SAID[0], SAID[0]


def test_audio_that_is_never_speech_is_said_to_have_come(run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: "the agent said nothing within turn_timeout (3s)" of seconds of audio
    _run_dir, results = run
    reason = why(results["hum"])
    assert results["hum"]["status"] == "failed", reason
    assert re.search(r"the agent said nothing within turn_timeout \(3s\); \d+\.\ds of audio came, none of it "
                     r"speech as pcm16 16000 Hz: is that the encoding and rate the agent sends\?", reason), reason


def test_a_stop_with_no_message_of_it_is_measured_and_one_never_made_is_long(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: on `voice` without an `interrupted` message the stop was never measured (each barge-in replaced
    # the one before, unclosed), or measured to the end of the next reply (its audio extended the stop)
    run_dir, results = run

    def stops(test: str) -> list[float]:
        result = json.loads((run_dir / "burst" / test / "run-1" / "result.json").read_text())
        return [t["agent"]["measures"]["interruption_stop_ms"] for t in result["turns"]
                if "interruption_stop_ms" in (t["agent"].get("measures") or {})]

    assert results["stops"]["status"] == "passed", why(results["stops"])
    measured = stops("stops")
    assert measured and STOPS, (measured, STOPS)
    # the agent stops 300 ms after the caller's first loud frame reached it (its own clock: STOPS); tamesu
    # times from the caller's first frame to the talked-over reply's last audio
    assert all(150 <= value <= 1500 for value in measured), (measured, STOPS)
    ignored = stops("ignores")
    print("tamesu's interruption_stop_ms:", measured, "the agent's own stops:", STOPS, "ignored:", ignored)
    assert ignored and all(value >= 1000 for value in ignored), ignored  # talked on over the caller's words
    # before: the talked-over answer playing on after the caller's words was the reply to them, "answered" at
    # once (time to first audio 0-20 ms) with its end; the real answer (0.3 s after the first ended) never heard
    result = json.loads((run_dir / "burst" / "ignores" / "run-1" / "result.json").read_text())
    talked_over, last = (turn["agent"] for turn in result["turns"][-2:])
    assert last["measures"]["time_to_first_audio_ms"] >= 250, last
    # the answer starts 0.3 s after the talked-over one stopped (a loaded machine may stretch it, never shrink it)
    assert last["audio"]["agent_from_ms"] >= talked_over["audio"]["agent_stopped_at_ms"] + 200, (talked_over, last)
    set_aside = [e for e in result["events"] if e["name"] == "agent_spoke_before_reply"]
    assert set_aside and "the reply the user talked over played on" in set_aside[0]["data"]["why"], result["events"]


def test_a_greeting_in_one_message_and_an_answer_in_a_burst_pass(run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    run_dir, records = run
    assert records["burst"]["status"] == "passed", why(records["burst"])
    result = json.loads((run_dir / "burst" / "burst" / "run-1" / "result.json").read_text())
    turns = result["turns"]
    assert "bakery" in turns[0]["agent"]["text"].lower()
    assert "morning" in turns[-1]["agent"]["text"].lower()
    # the answer was complete when its audio had played: the idle wait (1 s) that tells so was counted in its
    # turn_latency_ms, and the greeting, which answers no user turn, was the run's "slowest answer"
    answer = turns[-1]["agent"]
    assert answer["first_token_at_ms"] < answer["completed_at_ms"] < answer["audio"]["agent_to_ms"] + 300, answer
    latency = answer["completed_at_ms"] - answer["sent_at_ms"]
    assert result["metrics"]["turn_latency_ms"] == pytest.approx(latency, abs=0.01), result["metrics"]


def test_one_transcript_per_turn_and_the_greeting_on_the_timeline(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    run_dir, _records = run
    folder = run_dir / "burst" / "burst" / "run-1"
    lines = json.loads((folder / "transcript.json").read_text())["lines"]
    agent = [line for line in lines if line["role"] == "agent"]
    assert len(agent) == 2, lines
    # the turn's text (what assertions read) is the one transcription: `heard` is the same words
    assert all(line["heard"] == line["text"] and line["text"] for line in agent), agent
    greeting, answer = agent
    assert greeting["turn"] == 1 and greeting["from_ms"] is not None and greeting["to_ms"] is not None, greeting
    # the greeting came in one message: it plays for its length on the playback clock, before the user speaks
    assert 2000 < greeting["to_ms"] - greeting["from_ms"] < 4000, greeting
    user = next(line for line in lines if line["role"] == "user")
    assert greeting["to_ms"] <= user["from_ms"] < answer["from_ms"], lines
    result = json.loads((folder / "result.json").read_text())
    assert result["turns"][0]["agent"]["audio"]["agent_said"] == result["turns"][0]["agent"]["text"]
    html = (run_dir / "report.html").read_text()
    assert "agent, turn 1: Welcome to the bakery" in html


def test_a_paced_agent_that_bursts_fails_saying_paced(run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    _run_dir, records = run
    assert records["paced"]["status"] == "failed"
    reason = why(records["paced"])
    assert "faster than real time" in reason and "audio.paced is true, so the agent must send at real-time pace" \
        in reason, reason


def test_audio_that_came_while_the_caller_spoke_is_timed_by_its_arrival(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # before: the bridge's frames that came while the caller spoke were timed by when the turn read them, all at
    # once after the caller's last frame ("1.8s of audio arrived in 0.0s"): with audio.paced a real-time agent
    # failed as faster than real time, and without it the run said it flooded
    run_dir, records = run
    assert records["paced-line"]["status"] == "passed", why(records["paced-line"])
    for test in ("line", "paced-line"):
        events = json.loads((run_dir / "burst" / test / "run-1" / "result.json").read_text())["events"]
        assert not [e for e in events if e["name"] == "audio_flood"], (test, events)


def test_a_steady_stream_at_twice_real_time_names_the_sample_rate(
        run: tuple[Path, dict[str, dict[str, Any]]], tmp_path: Path) -> None:
    _run_dir, records = run
    record = records["rate"]
    if "arrives steadily at" not in why(record) and starved(record):
        # the pace of the chunks says the rate: at load 28, tamesu's loop waiting for a core a tenth of the call
        # and more, they came too unevenly to say any pace, the greeting passed and the next turn failed "said
        # nothing". Called again alone, with the agent idle, the rate must be named
        record = _alone(tmp_path, "rate")
    assert record["status"] == "failed"
    reason = why(record)
    # the agent sends 16 kHz at real-time pace; read as 8 kHz that is 2.0x, give or take the arrival jitter of a
    # loaded machine with the other calls of the run at once (2.1x seen on CI: 5.0 s of audio in 2.4 s; a CI loaded
    # by another job beside it timed the chunks at 2.5x and 2.7x): 16000 Hz is among the rates named
    pace = re.search(r"arrives steadily at ([0-9.]+)x real time", reason)
    assert pace and 1.8 <= float(pace.group(1)) <= 2.8, reason
    named = re.search(r"is audio.sample_rate \(8000\) the rate the agent sends\? \(([0-9 or]+) Hz would play in real "
                      r"time", reason)
    assert named and "16000" in named.group(1).split(" or "), reason


def test_a_burst_is_told_from_a_stream_at_another_rate() -> None:
    from tamesu.targets.audio.burst import steady_factor

    assert steady_factor([(k * 20.0, 40.0) for k in range(100)], 8000) == 2.0  # 16 kHz read as 8 kHz, paced
    assert steady_factor([(k * 0.01, 20.0) for k in range(100)], 16000) is None  # a burst
    assert steady_factor([(k * 20.0, 20.0) for k in range(100)], 16000) is None  # real time
    assert steady_factor([(k * 8.0, 40.0) for k in range(100)], 16000) is None  # 5x: no usual rate's pace
    # a sentence, a pause, then the rest: the longest stretch tells
    assert steady_factor([(k * 20.0, 40.0) for k in range(20)] + [(900 + k * 20.0, 40.0) for k in range(80)],
                         8000) == 2.0


def test_the_docs_recipe_transcribes_a_runs_audio_wav(run: tuple[Path, dict[str, dict[str, Any]]],
                                                      tmp_path: Path) -> None:
    """The script of docs/voice.md ("Transcribing audio.wav yourself"), as written, on the burst run's recording."""
    page = (ROOT / "docs" / "voice.md").read_text(encoding="utf-8")
    section = page.split("## Transcribing `audio.wav` yourself", 1)[1].split("\n## ", 1)[0]
    script = re.search(r"```python\n(.*?)```", section, re.S)
    assert script, "the recipe's python block"
    (tmp_path / "transcribe.py").write_text(script.group(1))
    run_dir, _records = run
    wav = run_dir / "burst" / "burst" / "run-1" / "audio.wav"
    done = subprocess.run([sys.executable, str(tmp_path / "transcribe.py"), str(wav)], capture_output=True,
                          text=True, timeout=180, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("agent:" in line and "bakery" in line.lower() for line in lines), done.stdout
    assert any("user:" in line and "open" in line.lower() for line in lines), done.stdout
    assert any("agent:" in line and "morning" in line.lower() for line in lines), done.stdout


def test_every_metric_the_calls_recorded_is_one_the_voice_target_declares(
        run: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    # validate refuses an SLO on a name the suite's targets do not declare (plan/_slo_names), so a metric a call
    # records that `VoiceTarget.metric_names` leaves out would have its SLO refused: what this run's calls recorded
    # (greetings, barge-ins, lines, failures) is held to it
    from tamesu import targets
    from tamesu.plan._slo_names import DISTRIBUTIONS, RUN_METRICS, measurable

    run_dir, _records = run
    declared = targets.target_class("voice").metric_names
    assert declared is not None
    recorded = {name for path in run_dir.rglob("result.json") for name in json.loads(path.read_text())["metrics"]}
    assert {"time_to_first_audio_ms_p95", "interruption_stop_ms", "greeting_ms", "talk_over_ratio", "voice_clears",
            "frame_late_ms_p99"} <= recorded, sorted(recorded)
    assert sorted(name for name in recorded if not measurable(name, RUN_METRICS | declared)) == [], sorted(recorded)
    # what they record as a distribution (its _p50, _p95, _max) is one validate's hints say takes a statistic
    assert {name.removesuffix("_p95") for name in recorded if name.endswith("_p95")} <= DISTRIBUTIONS, recorded
