"""What the voice tests share: a skip when the `voice` extra is absent, the reference Realtime agent
(examples/realtime-agent) on its own loop for the whole session, the models loaded once, and the calls of
the tests that check a metric against the agent's own clock."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from urllib.parse import urlencode

import pytest

from tamesu.audio.extra import problem

ROOT = Path(__file__).resolve().parents[2]
AGENT_DIR = ROOT / "examples" / "realtime-agent"
VOICE_MISSING = problem()
needs_voice = pytest.mark.skipif(VOICE_MISSING is not None, reason=VOICE_MISSING or "")


def agent_module() -> ModuleType:
    """examples/realtime-agent/agent.py, imported from its file (its folder is no package)."""
    name = "realtime_reference_agent"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, AGENT_DIR / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def realtime_agent() -> Iterator[str]:
    """The reference agent's ws:// URL, one for every voice test of the session."""
    if VOICE_MISSING is not None:
        pytest.skip(VOICE_MISSING)
    from tamesu.audio import stt, tts

    tts.preload()
    stt.model()
    agent = agent_module().ThreadAgent()
    try:
        yield agent.url
    finally:
        agent.stop()


Again = Callable[[list[tuple[str, dict]]], Collection[str]]
"""Given every call made so far (name, result.json), in order: the names that need another call."""


def calls_one_at_a_time(tamesu: Callable, tmp_path: Path, *, targets: dict[str, str], test: str, repeat: int,
                        timeout: float, again: Again | None = None, starved_extra: int = 0) -> list[tuple[str, dict]]:
    """A suite of `targets` (name: its YAML flow mapping), each with one test of the same name (`test`: the rest of
    its YAML mapping after the name and target), through `tamesu run` one call at a time, so that an agent's notes
    are in the order the calls ran. Each name is called `repeat` times; with `again`, in rounds of one call each,
    a name called again only while `again` names it (a test that takes the closer of a name's calls needs no
    second call when the first already agrees: the clock lanes' wall time halves), and up to `starved_extra`
    rounds more for a name every call of which was `starved`. Returns each call's test name and result.json, in
    the order they ran; every run must pass."""
    if again is None:
        return _run(tamesu, tmp_path, targets=targets, test=test, repeat=repeat, timeout=timeout)
    calls: list[tuple[str, dict]] = []
    pending = list(targets)
    for round_number in range(1, repeat + starved_extra + 1):
        folder = tmp_path / f"round{round_number}"
        folder.mkdir()
        calls += _run(tamesu, folder, targets={name: targets[name] for name in pending}, test=test, repeat=1,
                      timeout=timeout)
        pending = [name for name in pending if name in set(again(calls))]
        if round_number >= repeat:
            pending = [name for name in pending if all(starved(result) for made, result in calls if made == name)]
        if not pending:
            break
    return calls


def _run(tamesu: Callable, tmp_path: Path, *, targets: dict[str, str], test: str, repeat: int,
         timeout: float) -> list[tuple[str, dict]]:
    lines = ["targets:", *(f"  {name}: {target}" for name, target in targets.items()), "tests:",
             *(f"  - {{ name: {name}, target: {name}, repeat: {repeat}, {test} }}" for name in targets)]
    suite = tmp_path / "clock.tamesu.yaml"
    suite.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    done = tamesu(["run", str(suite), "--out", str(out), "--parallel", "1"], cwd=tmp_path,
                  env={"HF_HUB_OFFLINE": "1"}, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(path.read_text()) for path in out.rglob("result.json")]
    return [(r["test"], r) for r in sorted(results, key=lambda r: r["started_at"])]


def starved(record: dict) -> bool:
    """tamesu's own audio loop waited for a core a tenth of the call or more (`loop_runqueue_ms`): a record of
    results.jsonl, or a run's result.json."""
    runs = record.get("runs") or [record]
    waited = max((r.get("metrics", {}).get("loop_runqueue_ms", 0.0) for r in runs), default=0.0)
    return bool(waited >= 0.1 * record["duration_ms"])


def not_yet_within(differences: dict[str, list[float]], bound: float) -> list[str]:
    """The names none of whose calls is within `bound` of the agent's own clock (tamesu minus the agent, ms)."""
    return [name for name, found in differences.items() if not any(abs(d) <= bound for d in found)]


def calls_on_the_agents_clock(tamesu: Callable, tmp_path: Path, *, knob: str, values: Sequence[int],
                              formats: Sequence[str], repeat: int, test: str, notes: Sequence[str],
                              timeout: float, again: Callable[[ModuleType, list[tuple[str, dict]]], Collection[str]],
                              heard: str = "") -> tuple[ModuleType, list[tuple[str, dict]]]:
    """A target of the reference agent for each audio format and each value of its `knob` (a query parameter:
    a delay or pause it injects), named `FORMAT_VALUE` (`calls_with_knobs`); `heard`: what the agent takes every
    utterance to say instead of transcribing it (`?heard=`)."""
    extra: dict[str, int | str] = {"heard": heard} if heard else {}
    return calls_with_knobs(tamesu, tmp_path, targets={f"{fmt}_{value}": (fmt, {knob: value, **extra})
                                                       for fmt in formats for value in values},
                            repeat=repeat, test=test, notes=notes, timeout=timeout, again=again)


def calls_with_knobs(tamesu: Callable, tmp_path: Path, *, targets: dict[str, tuple[str, dict[str, int | str]]],
                     repeat: int, test: str, notes: Sequence[str], timeout: float,
                     again: Callable[[ModuleType, list[tuple[str, dict]]], Collection[str]]
                     ) -> tuple[ModuleType, list[tuple[str, dict]]]:
    """A target of the reference agent for each name of `targets` (name: its audio format and the query
    parameters it injects, such as `reply_delay_ms`), each with one test made one call at a time, up to `repeat`
    times while `again` (given the agent module and the calls so far) names it (`calls_one_at_a_time`), so that
    the agent's `notes` lists (cleared first) are in the order the calls ran. Returns the agent module and each
    call's test name and result.json, in that order."""
    from tamesu.audio import stt, tts

    module = agent_module()
    tts.preload()
    stt.model()
    agent = module.ThreadAgent()
    for note in notes:
        getattr(module, note).clear()
    try:
        suite = {name: f'{{ type: realtime, url: "{agent.url}?{urlencode(knobs)}", mode: audio, '
                       f"audio_format: {fmt}, turn_detection: commit }}"
                 for name, (fmt, knobs) in targets.items()}
        calls = calls_one_at_a_time(tamesu, tmp_path, targets=suite, test=test, repeat=repeat, timeout=timeout,
                                    again=lambda done: again(module, done))
    finally:
        agent.stop()
    return module, calls
