"""What the voice tests share: a skip when the `voice` extra is absent, the reference Realtime agent
(examples/realtime-agent) on its own loop for the whole session, the models loaded once, and the calls of
the tests that check a metric against the agent's own clock."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

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


def calls_one_at_a_time(tamesu: Callable, tmp_path: Path, *, targets: dict[str, str], test: str, repeat: int,
                        timeout: float) -> list[tuple[str, dict]]:
    """A suite of `targets` (name: its YAML flow mapping), each with one test of the same name (`test`: the rest of
    its YAML mapping after the name and target) made `repeat` times, through `tamesu run` one call at a time, so
    that an agent's notes are in the order the calls ran. Returns each call's test name and result.json, in that
    order; the run must pass."""
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


def calls_on_the_agents_clock(tamesu: Callable, tmp_path: Path, *, knob: str, values: Sequence[int],
                              formats: Sequence[str], repeat: int, test: str, notes: Sequence[str],
                              timeout: float) -> tuple[ModuleType, list[tuple[str, dict]]]:
    """A target of the reference agent for each audio format and each value of its `knob` (a query parameter:
    a delay or pause it injects), named `FORMAT_VALUE`, each with one test made `repeat` times one call at a
    time (`calls_one_at_a_time`), so that the agent's `notes` lists (cleared first) are in the order the calls
    ran. Returns the agent module and each call's test name and result.json, in that order."""
    from tamesu.audio import stt, tts

    module = agent_module()
    tts.preload()
    stt.model()
    agent = module.ThreadAgent()
    for note in notes:
        getattr(module, note).clear()
    try:
        targets = {f"{fmt}_{value}": f'{{ type: realtime, url: "{agent.url}?{knob}={value}", mode: audio, '
                                     f"audio_format: {fmt}, turn_detection: commit }}"
                   for fmt in formats for value in values}
        calls = calls_one_at_a_time(tamesu, tmp_path, targets=targets, test=test, repeat=repeat, timeout=timeout)
    finally:
        agent.stop()
    return module, calls
