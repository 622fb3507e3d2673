"""Voice metrics on the pipecat target checked against the pipecat bot's own clock (examples/voice-bot, clock.py:
where frames meet its websocket):

- `time_to_first_audio_ms`: the bot holds each reply an injected `?reply_delay_ms=` longer and notes the ms from
  the caller's last voiced audio frame as it arrived to the first audio frame of its reply as it went out;
  tamesu's value (its last frame of the utterance sent to the reply's first audio on the playback clock);
- `silence_gap_max_ms`: the bot puts an exact `?reply_pause_ms=` between the two sentences of its reply ("I can
  book a table for you. For how many people?", their silent edges cut) and notes the reply's longest silence
  between voiced samples (or the wait before its first); tamesu's value from VAD on the recorded tracks.

Each must agree within 20 ms for every delay and pause. Each call is made up to five times, until one agrees, and
the closest one counts, as in test_voice_clock.py: a loaded machine can hold either process at the moment the
reply's audio goes out (in one CI run, none of a pause's three calls came within 20 ms: another test's load). The
bot hangs up half a second after its reply's last audio went out (`?hang_up=1`, bot.py's `SaidAll`): no call
waits out `idle` after the reply (6-6.5 s a round of each test), only after the greeting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from agents.voice import not_yet_within
from agents.voice_bot import Call, ClockBot, calls_on_the_bots_clock, closest, needs_bot

# the first call of a worker's clock bot also waits for its first pipeline, seconds on a loaded machine:
# turn_timeout leaves room for it
DELAYS_MS = (0, 500, 1000)
PAUSES_MS = (1500, 3000)
SAID = "Can I book a table for two people?"
SCRIPT = f'scenario: {{ script: [ {{ say: "{SAID}" }} ] }}'
# the bot takes the caller to say SAID without its Whisper (bot.py's `?heard=`): 1-3 s of each reply's wait on a
# loaded machine, none of it what these tests time
HEARD = f"heard={quote(SAID)}"
KNOBS = f"hang_up=1&greeting=Hello.&{HEARD}"
# the lines lane (tests/conftest.py), beside test_voice_clock_lines.py: one clock bot for both, calls one at a time
pytestmark = [needs_bot, pytest.mark.audio, pytest.mark.xdist_group("audio-lines"), pytest.mark.timeout(580)]


def _first(calls: list[Call]) -> list[tuple[str, float, float]]:
    return [(name, measured[0], own["first_audio_ms"][0]) for name, result, own in calls
            if len(measured := [t["agent"]["measures"]["time_to_first_audio_ms"] for t in result["turns"]
                                if "time_to_first_audio_ms" in (t["agent"].get("measures") or {})]) == 1
            and len(own.get("first_audio_ms", [])) == 1]


def _silence(calls: list[Call]) -> list[tuple[str, float, float]]:
    return [(name, result["metrics"]["silence_gap_max_ms"], own["silence_ms"][0]) for name, result, own in calls
            if len(own.get("silence_ms", [])) == 1]


def _again(rows_of: Callable[[list[Call]], list[tuple[str, float, float]]]) -> Callable[[list[Call]], list[str]]:
    """The targets none of whose calls yet agrees with the bot (a call whose notes are not one reply's counts as
    not agreeing)."""
    def again(calls: list[Call]) -> list[str]:
        found = closest(rows_of(calls))
        late = not_yet_within({name: found.get(name, []) for name, _result, _own in calls}, 20)
        return [*late, *(name for name in _not_yet_paused(calls) if name not in late)]
    return again


def _not_yet_paused(calls: list[Call]) -> list[str]:
    """The pause targets none of whose calls the bot noted pausing as told (a frame goes out a few ms early or
    late of its place on the bot's loop, and a loaded machine can hold the loop mid-pause: 50 ms)."""
    paused: dict[str, bool] = {}
    for name, _result, own in calls:
        if name.startswith("pause_"):
            told = int(name.rsplit("_", 1)[1])
            paused[name] = paused.get(name, False) or any(gap >= told - 50 for gap in own.get("silence_ms", [])[:1])
    return [name for name, done in paused.items() if not done]


def test_time_to_first_audio_agrees_with_the_pipecat_bots_own_clock(tamesu: Callable, tmp_path: Path,
                                                                   voice_bot_clock: ClockBot) -> None:
    targets = {f"delay_{delay}": f'{{ type: pipecat, url: "{{base}}/pipecat?{KNOBS}&reply_delay_ms={delay}&{{call}}",'
                                 ' mode: audio, sample_rate: 16000, idle: 2s, turn_timeout: 90s }'
               for delay in DELAYS_MS}
    calls = calls_on_the_bots_clock(tamesu, tmp_path, voice_bot_clock, targets=targets, test=SCRIPT, repeat=5,
                                    timeout=560, again=_again(_first))
    for name, result, own in calls:
        measured = [t["agent"]["measures"]["time_to_first_audio_ms"] for t in result["turns"]
                    if "time_to_first_audio_ms" in (t["agent"].get("measures") or {})]
        assert len(measured) == len(own["first_audio_ms"]) == 1, (name, measured, own)  # the greeting is none
        assert own["first_audio_ms"][0] >= int(name.rsplit("_", 1)[1]), (name, own)  # the bot waited as told
    rows = _first(calls)
    differences = closest(rows)
    print("the bot's own time to first audio and tamesu's (ms):", rows)
    print("tamesu minus the bot's own clock (ms):", differences)
    assert set(differences) == set(targets), differences
    assert all(min(abs(d) for d in both) <= 20 for both in differences.values()), differences


def test_silence_gap_agrees_with_the_pipecat_bots_own_clock(tamesu: Callable, tmp_path: Path,
                                                            voice_bot_clock: ClockBot) -> None:
    # idle above the pause: the bot's silence inside its reply is no end of its turn (its hang-up is); each call
    # waits it out after the greeting, so each target's is its pause and 1 s (a loaded bot has stalled a reply
    # 0.2-0.65 s), up to the 4 s both waited
    targets = {f"pause_{pause}": f'{{ type: pipecat, url: "{{base}}/pipecat?{KNOBS}&reply_pause_ms={pause}&{{call}}",'
                                 f' mode: audio, sample_rate: 16000, idle: {min(4.0, pause / 1000 + 1):g}s, '
                                 'turn_timeout: 90s }'
               for pause in PAUSES_MS}
    calls = calls_on_the_bots_clock(tamesu, tmp_path, voice_bot_clock, targets=targets, test=SCRIPT, repeat=5,
                                    timeout=560, again=_again(_silence))
    for name, _result, own in calls:
        assert len(own["silence_ms"]) == 1, (name, own)
    # the pause was made, in one call at least
    assert not _not_yet_paused(calls), [(name, own) for name, _result, own in calls]
    rows = _silence(calls)
    differences = closest(rows)
    print("the bot's own longest silence and tamesu's (ms):", rows)
    print("tamesu minus the bot's own clock (ms):", differences)
    assert set(differences) == set(targets), differences
    assert all(min(abs(d) for d in both) <= 20 for both in differences.values()), differences
