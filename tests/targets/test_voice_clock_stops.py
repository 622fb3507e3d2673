"""`interruption_stop_ms` checked against the agent's own clock: the caller talks over every reply
(`interrupt_probability: 1`), tamesu cancels it, and the reference Realtime agent goes on for an injected
`stop_delay_ms` before it stops, noting on its clock the ms from the cancel to its last audio delta; tamesu's
`interruption_stop_ms` (the caller's first word over the reply to the last agent audio that still arrived)
must agree within 20 ms for every delay and codec. The agent also notes how long both spoke at once around the
cancel, by the one definition of speaking the metric uses (`tamesu.audio.metrics.speech`) on its own clock of
the caller's audio as it arrived and its own as a client's player played it, at each alignment of VAD's windows
(the lowest and highest); tamesu's `talk_over_ratio` times the agent's speech time must fall within
`TALK_OVER_MS` of that span. Each call is made up to three times and the closest one counts, as in
test_voice_clock.py: a loaded machine can hold tamesu's loop at the moment the last audio arrives. The agent
hears the caller's first utterance as "Can I see the menu" and the second, the one over its reply, as "I would
like to book a table" (`?heard=A|B`): its Whisper, 1-3.5 s before each of a call's two replies, measured nothing
this test checks; the menu (15 s) is the reply talked over, and the second reply, waited out in real time and no
part of what is checked (only the first reply is talked over; `agent_speech_ms` times `talk_over_ratio` is the
overlap whatever the length), is the table question's 3 s: it was the menu again, 12 s more of every call."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import pytest

from agents.voice import agent_module, calls_on_the_agents_clock, needs_voice, not_yet_within, realtime_agent  # noqa: F401

# the agent paces its audio in 100 ms chunks: a cancel that arrives between two waits the next one, so a
# delay shorter than a chunk would be measured as the chunk; the delays start above it
DELAYS_MS = (150, 400, 800)
FORMATS = ("pcm16", "g711_ulaw")
TALK_OVER_MS = 60
"""The talk-over rests on two timelines where the stop rests on one instant: a chunk of the agent's reply that
tamesu's loop reads late is played late from then on (a player does that), and the caller's frames are placed
where they arrived at the agent. Closer of two calls at load 15-19 on 2 cores: within 6 ms.

The agent's figure is a span, not one number: VAD reads 32 ms windows from the clip's first sample, and a reply
cut off mid-word can end in a fragment (a 52 ms burst after 140 ms of nothing) that is speech at some
alignments and not at others. The G.711 calls at 800 ms that failed on CI (+104 to +180 ms, three of three)
were that: one reproduced (714 vs 609), and tamesu's own recording, cut where the agent's window starts, gives
602-606 ms at 3 of 16 alignments 2 ms apart and 708 at the rest; spans of one call were up to 168 ms wide
(G.711, 563-731) and a pcm16 call's 463-620 (tamesu 620). Against the span, four runs at load 3-6 on 2 cores:
22 of 24 first calls within 16 ms; the other two 124 and 135 ms off while their stops were 64 and 154 ms off
too (tamesu's loop held), their second calls within 1.1 ms."""
pytestmark = [needs_voice, pytest.mark.audio, pytest.mark.xdist_group("audio-clock"), pytest.mark.timeout(580)]


def _differences(module: ModuleType, calls: list[tuple[str, dict]]) -> tuple[dict[str, list[float]],
                                                                           dict[str, list[float]]]:
    """Per target, in call order: interruption_stop_ms minus the agent's own, and the talk-over minus the nearest
    end of the agent's span (0 inside it)."""
    # only the first reply is talked over (the second one has no caller turn after it)
    assert len(calls) == len(module.STOPS) == len(module.OVERLAPS), (module.STOPS, module.OVERLAPS)
    stops: dict[str, list[float]] = {}
    overlaps: dict[str, list[float]] = {}
    for (name, result), own_stop, own_overlap in zip(calls, module.STOPS, module.OVERLAPS, strict=True):
        measures, metrics = result["turns"][0]["agent"]["measures"], result["metrics"]
        stops.setdefault(name, []).append(round(measures["interruption_stop_ms"] - own_stop, 1))
        overlap = metrics["talk_over_ratio"] * metrics["agent_speech_ms"]
        lowest, highest = own_overlap
        overlaps.setdefault(name, []).append(round(overlap - min(max(overlap, lowest), highest), 1))
    return stops, overlaps


def _again(module: ModuleType, calls: list[tuple[str, dict]]) -> set[str]:
    stops, overlaps = _differences(module, calls)
    return {*not_yet_within(stops, 20), *not_yet_within(overlaps, TALK_OVER_MS)}


def test_interruption_stop_agrees_with_the_agents_own_clock(tamesu: Callable, tmp_path: Path) -> None:
    module, calls = calls_on_the_agents_clock(
        tamesu, tmp_path, knob="stop_delay_ms", values=DELAYS_MS, formats=FORMATS, repeat=3,
        test='persona: { behaviors: { interrupt_probability: 1 } }, scenario: { script: [ { say: "Can I see the '
             'menu" }, { say: "Sorry, is it open on Sunday" } ] }', notes=["STOPS", "OVERLAPS"], timeout=560,
        again=_again, heard="Can I see the menu|I would like to book a table")
    for (name, result), own_stop in zip(calls, module.STOPS, strict=True):
        assert own_stop >= int(name.rsplit("_", 1)[1]), (name, own_stop)  # the agent kept talking as told
        # the reply waited out is the short one: the agent heard the caller's second utterance as told
        assert "how many people" in result["turns"][-1]["agent"]["text"], (name, result["turns"][-1]["agent"])
    stops, overlaps = _differences(module, calls)
    print("agent's own stop (ms):", module.STOPS)
    print("agent's own talk-over, lowest and highest over VAD's alignments (ms):", module.OVERLAPS)
    print("interruption_stop_ms minus the agent's own clock (ms):", stops)
    print("talk-over outside the agent's own span (ms):", overlaps)
    assert set(stops) == {f"{fmt}_{delay}" for fmt in FORMATS for delay in DELAYS_MS}, stops
    assert all(min(abs(d) for d in both) <= 20 for both in stops.values()), stops
    assert all(min(abs(d) for d in both) <= TALK_OVER_MS for both in overlaps.values()), overlaps


async def test_the_agents_stop_ends_on_sound(realtime_agent: str) -> None:  # noqa: F811
    """The agent's clock of its stop ends on a chunk with sound in it, the last audio a caller hears and tamesu's
    stop counts (`level.audible`). The menu's first sentence, in espeak's voice, has 100 ms of zeros at its comma
    (its 13th chunk): a stop delay that ended there put the agent's stop on silence, a chunk after the last sound,
    and with synthesis ahead every call of test_interruption_stop_agrees_with_the_agents_own_clock cancelled the
    menu at the same moment (the delay drawn from the run's seed, the words ready), so that pcm16 400 ms read
    91-95 ms short of the agent's clock in every call of two CI runs (each 100 ms less the few ms from its cancel to
    its next chunk). The agent sends a chunk every 100 ms, one ahead: cancelled 50 ms after the 6th to the 9th chunk
    came, its stop delay ends on the 11th to the 14th chunk, and the 13th, that silence, is one of them."""
    from websockets.asyncio.client import connect

    from tamesu.audio.clip import Clip
    from tamesu.audio.formats import AudioFormat
    from tamesu.audio.level import audible

    module = agent_module()
    wire = AudioFormat("pcm16", 24000)
    said = base64.b64encode(Clip.silence(200, 24000).wire(wire)).decode()
    url = realtime_agent + "?" + urlencode({"stop_delay_ms": 400, "heard": "Can I see the menu"})
    ends: list[tuple[int, bool, float]] = []
    async with connect(url, max_size=None, open_timeout=10) as ws:
        for after in (6, 7, 8, 9):
            for event in ({"type": "input_audio_buffer.append", "audio": said},
                          {"type": "input_audio_buffer.commit"}, {"type": "response.create"}):
                await ws.send(json.dumps(event))
            chunks: list[bytes] = []
            while True:
                got: dict[str, Any] = json.loads(await ws.recv())
                if got["type"] == "response.output_audio.delta":
                    chunks.append(base64.b64decode(got["delta"]))
                    if len(chunks) == after:  # halfway to the next chunk: the stop is never a chunk's edge
                        await asyncio.sleep(0.05)
                        await ws.send(json.dumps({"type": "response.cancel"}))
                elif got["type"] == "response.done":
                    assert got["response"]["status"] == "cancelled", got
                    break
            ends.append((len(chunks), audible(Clip.from_wire(chunks[-1], wire).samples), module.STOPS[-1]))
    print("(chunks sent, the last one has sound, the agent's stop ms):", ends)
    assert all(sound for _n, sound, _stop in ends), ends
    assert all(stop >= 400 for _n, _sound, stop in ends), ends
