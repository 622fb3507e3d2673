"""What `validate` says about voice settings: a persona's voice or behaviours on a target that has no audio
is a warning; a dtmf step on a target that cannot send DTMF, an unknown voice, or audio without the `voice`
extra is a suite error (one line, exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.voice import needs_voice
from conftest import ROOT
from hidden_modules import hiding

pytestmark = pytest.mark.audio

SUITE = """\
targets:
  shop: {{ type: rest, url: "http://127.0.0.1:9/chat" }}
  voice: {{ type: realtime, url: "ws://127.0.0.1:9/v1/realtime", mode: audio }}
  text: {{ type: realtime, url: "ws://127.0.0.1:9/v1/realtime" }}
tests:
{tests}
"""


def write(tmp_path: Path, tests: str) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE.format(tests=tests), encoding="utf-8")


@needs_voice
def test_voice_and_behaviours_on_a_target_without_audio_are_warnings(tmp_path: Path, tamesu) -> None:
    write(tmp_path, """\
  - name: rest persona
    target: shop
    persona: { voice: en_US-joe-medium, behaviors: { interrupt_probability: 0.3, background_noise: cafe } }
    scenario: { script: [ { say: hi } ] }
  - name: text realtime
    target: text
    persona: { behaviors: { silence_after_turn_ms: [300, 900] } }
    scenario: { script: [ { say: hi } ] }
  - name: audio realtime
    target: voice
    persona: { voice: en_US-joe-medium, behaviors: { interrupt_probability: 0.3 } }
    scenario: { script: [ { say: hi } ] }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert ("warning: suite.yaml:8:23: tests[0].persona.voice: rest target shop has no audio: the voice is not "
            "used") in warnings
    assert any("tests[0].persona.behaviors.interrupt_probability: rest target shop has no audio: "
               "interrupt_probability does nothing here" in w for w in warnings)
    assert any("tests[0].persona.behaviors.background_noise" in w for w in warnings)
    assert any("tests[1].persona.behaviors.silence_after_turn_ms: realtime target text has no audio (mode: text)"
               in w for w in warnings)
    assert not any("tests[2]" in w for w in warnings)  # on an audio target they mean something


@needs_voice
def test_dtmf_on_a_target_that_cannot_send_it_and_an_unknown_voice_are_errors(tmp_path: Path, tamesu) -> None:
    write(tmp_path, """\
  - name: digits
    target: voice
    persona: { voice: en-XX-robot }
    scenario: { script: [ { say: hi }, { dtmf: "2" } ] }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert any(line.startswith("suite.yaml:8:23: tests[0].persona.voice: no voice 'en-XX-robot' is installed "
                               "(installed: ") for line in lines), lines
    assert any(line.startswith("suite.yaml:9:48: tests[0].scenario.script[1].dtmf: realtime target voice cannot "
                               "send DTMF digits (targets that can: livekit, pipecat, sip, twilio, voice)")
               for line in lines), lines
    assert "Traceback" not in result.stderr


def test_audio_without_the_voice_extra_is_one_line_naming_it(tmp_path: Path, tamesu) -> None:
    """The extra is hidden from a child process (a site hook makes its modules unfindable): a suite that needs
    it gets one line saying what to install, exit 2, while a text suite still runs."""
    hide = hiding(tmp_path, "faster_whisper", "onnxruntime", "silero_vad")
    write(tmp_path, "  - { name: a, target: voice, scenario: { script: [ { say: hi } ] } }\n")
    env = {"PYTHONPATH": os.pathsep.join([str(hide), str(ROOT / "src")])}
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines()[0].startswith(
        "suite.yaml:3:10: targets.voice: mode: audio: audio needs the voice extra: pip install 'tamesu[voice]'")
    assert result.stderr.strip().splitlines()[1:] == ["1 problem found"]


def test_a_jsonl_case_asking_for_voice_on_a_text_target_is_warned(tmp_path: Path, tamesu) -> None:
    (tmp_path / "tamesu.yaml").write_text(
        'targets:\n  shop: { type: rest, url: "http://127.0.0.1:9/chat" }\n'
        "models:\n  simulator: { provider: fake, rules: [] }\n", encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text(
        '{"id": "voice", "simulator": {"use": "simulator", "metadata": {"persona": "Ana", "voice": "en-GB-female", '
        '"behaviors": {"interrupt_probability": 0.3}}}, '
        '"turns": [{"input": "hello", "options": {"metadata": {"dtmf": "2"}}}]}\n', encoding="utf-8")
    result = tamesu(["test", "-i", "cases.jsonl", "-n", "shop", "--dry-run"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: cases.jsonl:1:82: simulator.metadata.voice: rest target shop has no audio: voice is not used",
        "warning: cases.jsonl:1:107: simulator.metadata.behaviors: rest target shop has no audio: behaviors is "
        "not used",
        "warning: cases.jsonl:1:208: turns[0].options.metadata.dtmf: rest target shop cannot send DTMF digits: "
        "dtmf is not sent",
    ]
    # `tamesu validate` says the same of the file
    validated = tamesu(["validate", "cases.jsonl", "-n", "shop"], cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr
    assert validated.stderr.splitlines() == warnings


@needs_voice
def test_a_jsonl_dtmf_digit_on_a_voice_target_without_messages_dtmf_is_warned(tmp_path: Path, tamesu) -> None:
    # the same rule as a suite's dtmf step: a voice target sends digits only when messages.dtmf says how
    (tmp_path / "tamesu.yaml").write_text(
        'targets:\n  s: { type: voice, url: "ws://127.0.0.1:9/x" }\n'
        '  d: { type: voice, url: "ws://127.0.0.1:9/x", messages: { dtmf: { event: dtmf, digit: "{{message.digit}}" '
        '} } }\n', encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text(
        '{"id": "digits", "turns": [{"input": "hello", "options": {"metadata": {"dtmf": "2"}}}]}\n', encoding="utf-8")
    without = tamesu(["validate", "cases.jsonl", "-n", "s"], cwd=tmp_path)
    assert without.returncode == 0, without.stderr
    assert without.stderr.splitlines() == [
        "warning: cases.jsonl:1:72: turns[0].options.metadata.dtmf: voice target s cannot send DTMF digits: "
        "dtmf is not sent"]
    carried = tamesu(["validate", "cases.jsonl", "-n", "d"], cwd=tmp_path)
    assert carried.returncode == 0 and carried.stderr == "", carried.stderr
