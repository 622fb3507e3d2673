"""What the voice tests share: a skip when the `voice` extra is absent, the reference Realtime agent
(examples/realtime-agent) on its own loop for the whole session, and the models loaded once."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
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
