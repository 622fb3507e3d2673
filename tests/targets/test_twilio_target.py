"""The twilio target through the command: the example suites against the reference pipecat bot (one bot
process for the module), and small agents written here for marks, a silent agent, a drop and a flood."""

from __future__ import annotations

import base64
import json
import re
import shutil
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.twilio_agents import TwilioAgents
from agents.voice_bot import BOT_DIR, ExampleRun, needs_bot
from conftest import run_tamesu, why
from seeded import name_where
from tamesu.audio.extra import problem

# the first test of this module also pays for its module fixture, a whole tamesu run of the twilio suite (its own
# timeout: 400 s), and maybe the voice bot's start (90 s):
# pytest's 180 s default would cut it short on a loaded machine, before that timeout
pytestmark = [pytest.mark.audio, pytest.mark.timeout(520)]

needs_voice = pytest.mark.skipif(problem() is not None, reason=problem() or "")


@pytest.fixture(scope="module")
def bot_run(tmp_path_factory: pytest.TempPathFactory, voice_bot_url: str) -> Iterator[tuple[Path, str, int]]:
    project = tmp_path_factory.mktemp("voice-bot")
    for name in ("tamesu.yaml", "fake-rules.yaml", "twilio.tamesu.yaml"):
        shutil.copy(BOT_DIR / name, project / name)
    # two calls at once, as the voice and pipecat modules make them (the project file says one): the lane waits
    # half as long on the calls' real time (96 s of the lane for this run, 52 s at two)
    done = run_tamesu(["run", "--out", "out", "--parallel", "2"], cwd=project, env={"VOICE_BOT": voice_bot_url},
                      timeout=400)
    run_dir = next(d for d in (project / "out").iterdir() if d.is_dir())
    yield run_dir, done.stdout + done.stderr, done.returncode


@pytest.fixture(scope="module")
def example(bot_run: tuple[Path, str, int], voice_bot_url: str) -> ExampleRun:
    # a starved call of the two at once is made again alone (ExampleRun.outcomes, .checked)
    return ExampleRun(bot_run[0], "twilio.tamesu.yaml", "voice-bot-twilio", voice_bot_url, run_tamesu)


@needs_bot
def test_the_bot_suite_passes_over_twilio(bot_run: tuple[Path, str, int], example: ExampleRun) -> None:
    _run_dir, output, _code = bot_run
    assert "Traceback" not in output
    outcomes = example.outcomes()
    assert len(outcomes) == 4, output
    assert all(r["status"] == "passed" for r in outcomes.values()), {t: why(r) for t, r in outcomes.items()}


@needs_bot
def test_the_greeting_is_heard_and_the_answer_measured(example: ExampleRun) -> None:
    def checks(result: dict[str, Any]) -> None:
        assert re.search("press|billing", result["turns"][0]["agent"]["text"].lower())  # heard, if not word for word
        metrics = result["metrics"]
        assert metrics["greeting_ms"] > 0 and metrics["time_to_first_audio_ms"] > 0
        with wave.open(str(result["_dir"] / "audio.wav")) as wav:
            assert wav.getnchannels() == 2 and wav.getnframes() > wav.getframerate() * 3

    example.checked("greeting and a spoken answer", checks)


@needs_bot
def test_a_digit_and_a_barge_in_reach_the_bot(example: ExampleRun) -> None:
    def digit(result: dict[str, Any]) -> None:
        assert result["metrics"]["twilio_dtmf_sent"] == 1
        # the balance or its amount (Whisper tiny on the 8 kHz line once heard "your bond says $42")
        assert re.search(r"balance|42|forty.two", result["turns"][-1]["agent"]["text"].lower())

    def barge(result: dict[str, Any]) -> None:
        assert result["metrics"]["twilio_clears"] >= 1
        assert 0 <= result["metrics"]["interruption_stop_ms"] < 3000
        assert "barge_in" in [e["name"] for e in result["events"]]

    example.checked("a digit the bot acts on", digit)
    example.checked("a caller who talks over a long answer", barge)


@pytest.fixture(scope="module")
def agents() -> Iterator[TwilioAgents]:
    server = TwilioAgents()
    try:
        yield server
    finally:
        server.stop()


def _line(name: str, url: str, timeout: str) -> str:
    return f"""  {name}:
    type: twilio
    url: "{url}"
    from: "+15550100"
    to: "+15550199"
    parameters: {{ tenant: acme }}
    idle: 0.6s
    turn_timeout: {timeout}
    connect: {{ attempts: 1 }}
"""


# a caller that talks over the second answer no sooner than 1 s into it: that answer is whole by then
STRAY = name_where("tw", "stray", 2, lambda draws: draws[1] >= 1000)
ONE_CALL_TESTS = {
    "pause": ("pause", "persona: { behaviors: { silence_after_turn_ms: 2000 } }, "
                       'scenario: { script: [ { say: "When do you open?" }, { say: "And on Sundays?" } ] }'),
    "last": ("stray", "persona: { behaviors: { interrupt_probability: 1 } }, "
                      'scenario: { script: [ { say: "When do you open?" } ] }'),
    STRAY: ("stray", "persona: { behaviors: { interrupt_probability: 1 } }, scenario: { script: [ "
                     '{ say: "When do you open?" }, '
                     '{ say: "Sorry, could you tell me when you open tomorrow morning?" } ] }'),
    "eager": ("eager", "scenario: { script: [ "
                       '{ say: "I would like a table for four people on Friday evening at eight, please." } ] }'),
    "listens": ("listens", 'scenario: { script: [ { say: "When do you open?" }, { say: "And on Sunday?" } ] }'),
    "marks": ("marks", 'scenario: { script: [ { dtmf: "7" } ] }'),
    "cut": ("cut", 'scenario: { script: [ { say: "When do you open?" } ] }'),
}
"""The tests below that each need one call to an agent of the module's server (test name: its agent's path and
the rest of its YAML mapping)."""


@pytest.fixture(scope="module")
def one_call_run(agents: TwilioAgents, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, dict]]:
    """One `tamesu run` of every test of ONE_CALL_TESTS, each its own run before: seven runs, each paying for a
    process, its speech worker and its voices. The console output and each test's result.json. Two calls at once,
    the longest first (pause 16 s, last 10 s, stray 9 s at load 5): one at a time they were 58 s of the lane's wall
    clock. Their timed checks are lower bounds (the agent's own waits), which a call beside stretches, never
    shrinks."""
    project = tmp_path_factory.mktemp("twilio-one-call")
    lines = ["name: tw", "targets:"]
    for name, (path, _rest) in ONE_CALL_TESTS.items():
        if path == "marks":  # the start message's parameters, from and to are checked: the full line
            lines.append(_line(name, f"{agents.url}/{path}", "6s").rstrip("\n"))
            continue
        greeting = " greeting: false," if path == "listens" else ""
        lines.append(f'  {name}: {{ type: twilio, url: "{agents.url}/{path}",{greeting} idle: 0.6s, '
                     "turn_timeout: 10s, connect: { attempts: 1 } }")
    lines.append("tests:")
    lines += [f"  - {{ name: {name}, target: {name}, {rest} }}" for name, (_path, rest) in ONE_CALL_TESTS.items()]
    (project / "t.tamesu.yaml").write_text("\n".join(lines) + "\n")
    done = run_tamesu(["run", "--out", "out", "--parallel", "2"], cwd=project, timeout=300)
    output = done.stdout + done.stderr
    results = {name: json.loads(path.read_text()) for name in ONE_CALL_TESTS
               for path in (project / "out").glob(f"*/tw/{name}/run-1/result.json")}
    assert set(results) == set(ONE_CALL_TESTS), output
    return output, results


def _passed(one_call_run: tuple[str, dict[str, dict]], name: str) -> dict[str, Any]:
    output, results = one_call_run
    result = results[name]
    assert result["status"] == "passed", why(result) + "\n" + output
    return result


@needs_voice
def test_tamesu_plays_twilio_start_media_dtmf_marks_and_stop(agents: TwilioAgents,
                                                            one_call_run: tuple[str, dict[str, dict]]) -> None:
    _passed(one_call_run, "marks")
    events = agents.events("/marks")
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["connected", "start"] and kinds[-1] == "stop"
    start = events[1]["start"]
    assert start["mediaFormat"] == {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
    parameters = dict(start["customParameters"])
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", parameters.pop("traceparent"))  # the conversation's
    assert parameters == {"tenant": "acme", "from": "+15550100", "to": "+15550199"}
    assert start["callSid"].startswith("CA") and events[1]["streamSid"].startswith("MZ")
    media = [e for e in events if e["event"] == "media"]
    assert media and all(len(base64.b64decode(e["media"]["payload"])) == 160 for e in media)
    assert [e["dtmf"]["digit"] for e in events if e["event"] == "dtmf"] == ["7"]
    # each mark came back once the audio before it had played, in order
    assert [e["mark"]["name"] for e in events if e["event"] == "mark"] == ["m1", "d7"]
    received = agents.received["/marks"]
    start_at = received[1][0]
    m1_at = next(at for at, e in received if e["event"] == "mark")
    assert m1_at - start_at >= 0.9
    # about 50 media messages a second: real-time pace, not a burst
    span = received[-1][0] - start_at
    assert len(media) <= 50 * span + 10


BAD_AGENTS = {"silent": "the agent said nothing within turn_timeout", "drop": "closed the websocket",
              "flood": "faster than real time",
              # before: "the agent said nothing" of a second of pcm16 read as mu-law
              "pcm": "the agent's audio is noise as mulaw and sounds like speech as pcm16: Twilio Media Streams' "
                     "encoding is mulaw, the agent sends pcm16?"}


@pytest.fixture(scope="module")
def bad_agents_run(agents: TwilioAgents, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, dict[str, str]]:
    """One run of a call to each bad agent, all at once (each a path of the module's server): one after
    another, each its own run, they were 10 s of the audio lane. The exit code, the console output, and each
    test's results.jsonl row as JSON."""
    project = tmp_path_factory.mktemp("twilio-bad")
    # the agent that drops the call is reached through a templated password holding `/` (f9108a1d: rendered as
    # text, it ended the host, 'Invalid port' and the password's head said): its reason is said all the same
    url = {name: f"{agents.url}/{name}" for name in BAD_AGENTS}
    url["drop"] = url["drop"].replace("ws://", "ws://u:{{secrets.TW_PW}}@")
    (project / "t.tamesu.yaml").write_text(
        "name: tw\ntargets:\n" + "".join(_line(name, url[name], "3s") for name in BAD_AGENTS)
        + "tests:\n" + "".join(f"  - {{ name: {name}, target: {name}, scenario: {{ script: [ {{ say: hello }} ] }} }}\n"
                               for name in BAD_AGENTS))
    done = run_tamesu(["run", "--out", "out", "--parallel", "4"], cwd=project, timeout=60, env={"TW_PW": "S3c/r3t?x"})
    run_dir = next(d for d in (project / "out").iterdir() if d.is_dir())
    rows = {json.loads(line)["test"]: line for line in (run_dir / "results.jsonl").read_text().splitlines()}
    return done.returncode, done.stdout + done.stderr, rows


@needs_voice
@pytest.mark.parametrize("name", list(BAD_AGENTS))
def test_a_bad_agent_fails_with_its_reason(bad_agents_run: tuple[int, str, dict[str, str]], name: str) -> None:
    code, output, rows = bad_agents_run
    assert code == 1, output
    assert json.loads(rows[name])["status"] == "failed", rows[name]
    reason = BAD_AGENTS[name]
    assert reason in rows[name] and reason in output and "Traceback" not in output, (rows[name], output)
    assert "S3c" not in output and "S3c" not in rows[name], (rows[name], output)


@needs_voice
def test_audio_that_came_while_the_caller_spoke_is_not_the_reply_to_it(
        one_call_run: tuple[str, dict[str, dict]]) -> None:
    """The caller talks over the /stray agent's first answer; the agent stops (a clear) but a last 40 ms of it
    comes 0.1 s into the caller's words, and it answers those a second after they end: the turn waits for that
    answer. Taken for the reply's start, the stray chunk's quiet since then was already longer than `idle` when
    the caller stopped, and the turn ended at once with 40 ms of audio, the answer after it."""
    result = _passed(one_call_run, STRAY)
    _greeting, first, second = result["turns"]
    assert first["agent"]["audio"]["interrupted_at_ms"] is not None  # the caller talked over the first answer
    assert second["agent"]["raw"][-1]["agent_audio_ms"] >= 300, second["agent"]["raw"]  # the answer, whole
    audio = second["agent"]["audio"]
    assert second["agent"]["first_token_at_ms"] >= audio["user_to_ms"]
    assert audio["agent_from_ms"] >= audio["user_to_ms"] + 900  # the agent answers 1 s after the caller stops


@needs_voice
def test_the_rest_of_a_reply_that_came_before_the_callers_words_is_not_the_reply_to_them(
        one_call_run: tuple[str, dict[str, dict]]) -> None:
    """The /pause agent's first answer has a 1.2 s pause in it, longer than `idle` (0.6 s): its turn ends at the
    pause, and the rest comes while the caller waits (2 s) before speaking again. Before: the rest was the reply to
    the caller's next words, said before them, and its quiet since then ended that turn the moment the caller
    stopped: the agent's answer to them, 1 s later, was never heard."""
    result = _passed(one_call_run, "pause")
    _greeting, _first, second = result["turns"]
    audio = second["agent"]["audio"]
    assert second["agent"]["first_token_at_ms"] >= audio["user_to_ms"], second["agent"]
    assert audio["agent_from_ms"] >= audio["user_to_ms"] + 500, audio  # it answers 1 s after the caller stops
    assert second["agent"]["raw"][-1]["agent_audio_ms"] >= 250, second["agent"]["raw"]
    set_aside = [e["data"] for e in result["events"] if e["name"] == "agent_spoke_before_reply"]
    assert set_aside and "went on after 0.6s of silence (idle) had ended its turn" in set_aside[0]["why"], set_aside
    assert set_aside[0]["from_ms"] < audio["user_from_ms"], (set_aside, audio)


@needs_voice
def test_the_last_reply_is_heard_to_its_end_when_the_caller_has_nothing_more_to_say(
        one_call_run: tuple[str, dict[str, dict]]) -> None:
    """A persona that talks over every reply ends a turn where it starts talking (0.3-1.2 s into the reply), but
    after the last one it has nothing more to say. Before: the call was hung up there, and the /stray agent's 3 s
    answer was cut to what had come by then, its text too: an assertion on its last words failed the agent."""
    result = _passed(one_call_run, "last")
    answer = result["turns"][-1]["agent"]
    assert answer["audio"]["interrupted_at_ms"] is None, answer["audio"]  # nobody talked over it
    assert answer["audio"]["agent_audio_ms"] >= 2900, answer["audio"]  # the 3 s answer, whole
    assert answer["completed_at_ms"] - answer["first_token_at_ms"] >= 2500, answer
    assert "reply_heard_out" in [e["name"] for e in result["events"]], result["events"]


@needs_voice
def test_a_reply_begun_while_the_caller_still_spoke_has_no_negative_time_to_first_token(
        one_call_run: tuple[str, dict[str, dict]]) -> None:
    """The /eager agent answers 0.4 s into the caller's words, while they go on. Before: its time to first token
    was its start less the end of the caller's words, about -2000 ms, in the run's metrics (an SLO on it passed),
    and nothing said the agent had talked over the caller."""
    result = _passed(one_call_run, "eager")
    answer = result["turns"][-1]["agent"]
    assert answer["raw"][-1]["agent_audio_ms"] >= 250, answer["raw"]  # its answer came, over the caller's words
    assert answer["first_token_at_ms"] is None, answer
    assert "time_to_first_token_ms" not in result["metrics"], result["metrics"]
    said = [e["data"] for e in result["events"] if e["name"] == "agent_spoke_before_reply"]
    assert said and "started its reply while the user was still speaking" in said[0]["why"], result["events"]
    assert said[0]["from_ms"] < said[0]["to_ms"] == pytest.approx(answer["audio"]["user_to_ms"], abs=1), said


@needs_voice
def test_an_agent_that_hangs_up_in_the_middle_of_its_words_is_said(
        one_call_run: tuple[str, dict[str, dict]]) -> None:
    """The /cut agent closes the socket 0.5 s into its tone. Before: the reply was taken as it came, with only a
    `hangup` event, as any goodbye is; nothing said the line was cut while the agent's audio was still speech."""
    result = _passed(one_call_run, "cut")
    output, _results = one_call_run
    assert "1 call closed by the agent while its audio was still speech (agent_hung_up_mid_speech" in output
    names = [e["name"] for e in result["events"]]
    assert "hangup" in names and "agent_hung_up_mid_speech" in names, result["events"]


@needs_voice
def test_an_agent_that_waits_for_the_caller_is_tested_with_greeting_false(
        one_call_run: tuple[str, dict[str, dict]]) -> None:
    """The /listens agent never greets. Before: no `greeting` key on twilio: it failed "turn 1 (the agent's
    greeting): the agent said nothing within turn_timeout"."""
    result = _passed(one_call_run, "listens")
    assert [t["user"] is not None for t in result["turns"]] == [True, True], result["turns"]
    assert all(t["agent"]["measures"].get("time_to_first_audio_ms") for t in result["turns"]), result["turns"]
