"""A line said again in the same run is not synthesised again (`tamesu.audio._kept`): the recordings a run has made
are kept by engine, voice, rate and text, bounded in bytes, the one said longest ago dropped first. Before, only
Piper's were kept (the last 64, whatever their size); espeak-ng synthesised every line of every run again."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.voice import needs_voice, realtime_agent  # noqa: F401  (a fixture)
from tamesu.audio._kept import Kept, Tally
from tamesu.audio.clip import Clip

SUITE = """\
targets:
  # the agent takes every line to say goodbye and ends the call (its own Whisper not asked: the calls are short)
  bella: {{ type: realtime, url: "{url}?heard=bye", mode: audio, turn_detection: commit, done_tool: end_call }}
tests:
  - name: espeak
    target: bella
    repeat: 2
    persona: {{ name: Eve, voice: "espeak:en-us" }}
    scenario: {{ script: [ {{ say: "Hello, I would like to book a table for two on Friday" }} ] }}
  - name: piper
    target: bella
    repeat: 2
    scenario: {{ script: [ {{ say: "Hello, I would like to book a table for two on Friday" }} ] }}
"""


@pytest.mark.audio
@needs_voice
@pytest.mark.timeout(240)
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="no espeak-ng")
def test_a_line_said_again_in_a_run_is_not_synthesised_again(realtime_agent: str, tamesu: Any,  # noqa: F811
                                                             tmp_path: Path) -> None:
    # espeak-ng's syntheses counted as they happen: the real espeak-ng, started through a script that notes each
    bin_dir, log = tmp_path / "bin", tmp_path / "espeak.log"
    bin_dir.mkdir()
    (bin_dir / "espeak-ng").write_text(
        f'#!/bin/sh\ncase " $* " in *" --stdout "*) echo "$*" >> "{log}";; esac\n'
        f'exec "{shutil.which("espeak-ng")}" "$@"\n', encoding="utf-8")
    (bin_dir / "espeak-ng").chmod(0o755)
    (tmp_path / "suite.yaml").write_text(SUITE.format(url=realtime_agent), encoding="utf-8")
    done = tamesu(["run", "suite.yaml", "--out", "out", "--parallel", "1"], cwd=tmp_path,
                  env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}, timeout=220)
    assert done.returncode == 0, done.stdout + done.stderr
    made, voices = {}, set()
    for path in (tmp_path / "out").glob("*/*/*/run-*/result.json"):
        result = json.loads(path.read_text())
        audio = next(e["data"] for e in result["events"] if e["name"] == "audio")
        made[(result["test"], result["run"])] = (audio["synthesised"], audio["synthesis_reused"])
        voices.add((result["test"], audio["voice"]))
    # each test's line made by its first run, and its second run's had from it
    assert made == {("espeak", 1): (1, 0), ("espeak", 2): (0, 1), ("piper", 1): (1, 0), ("piper", 2): (0, 1)}, made
    assert len(log.read_text().splitlines()) == 1, log.read_text()  # espeak-ng ran once for its two runs
    # the voice spoken with, the default one too (the event said null for it)
    assert voices == {("espeak", "espeak:en-us"), ("piper", "en_US-joe-medium")}, voices


def _clip(seconds: float, value: int = 1) -> Clip:
    return Clip(np.full(int(16000 * seconds), value, np.int16), 16000)


def test_the_kept_recordings_are_bounded_in_bytes_the_least_recently_said_dropped_first() -> None:
    kept = Kept(max_bytes=_clip(1).samples.nbytes * 3)
    made: list[str] = []

    async def say(text: str, seconds: float = 1.0) -> Clip:
        async def make() -> Clip:
            made.append(text)
            return _clip(seconds)

        return await kept.get(("espeak", "en-us", 1.0, text), make)

    async def main() -> None:
        for text in ("one", "two", "three", "one", "four"):  # "one" said again: "two" is the oldest, dropped
            await say(text)
        assert made == ["one", "two", "three", "four"]
        await say("two")
        assert made[-1] == "two" and kept.size_bytes <= kept.max_bytes
        await say("long", seconds=4)  # more than the bound: said, never kept
        await say("long", seconds=4)
        assert made[-2:] == ["long", "long"] and ("espeak", "en-us", 1.0, "one") in kept

    asyncio.run(main())


def test_callers_asking_at_once_share_one_synthesis_and_the_tally_says_so() -> None:
    kept, tallies = Kept(), [Tally(), Tally(), Tally()]
    made: list[int] = []

    async def make() -> Clip:
        made.append(1)
        await asyncio.sleep(0.05)
        return _clip(0.5)

    async def main() -> list[Clip]:
        key = ("piper", "joe.onnx", 1.0, "Table for two")
        together = await asyncio.gather(*(kept.get(key, make, tally) for tally in tallies[:2]))
        return [*together, await kept.get(key, make, tallies[2])]

    clips = asyncio.run(main())
    assert len(made) == 1 and all(clip is clips[0] for clip in clips)
    assert [(t.made, t.reused) for t in tallies] == [(1, 0), (0, 1), (0, 1)]
    with pytest.raises(ValueError):
        clips[0].samples[0] = 2  # read-only: no caller's gain or noise changes another's
