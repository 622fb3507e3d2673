"""The reference pipecat voice bot (examples/voice-bot/bot.py) as a child process, for the tests of the twilio
and voice targets. It runs in its own venv (`make .venv-voicebot`: pipecat-ai pins protobuf below 7, tamesu's
grpc target needs 7); without that venv, or without the voice extra here, the tests skip with the reason."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from tamesu.audio.extra import problem

ROOT = Path(__file__).resolve().parents[2]
BOT_DIR = ROOT / "examples" / "voice-bot"
BOT_PYTHON = Path(os.environ.get("VOICE_BOT_PYTHON", ROOT / ".venv-voicebot" / "bin" / "python"))
START_TIMEOUT_S = 90.0
"""A loaded machine imports pipecat and its models slowly; the bot says when it listens."""


def bot_problem() -> str | None:
    missing = problem()
    if missing:
        return missing
    if not BOT_PYTHON.exists():
        return f"the voice bot's venv is missing ({BOT_PYTHON}): make .venv-voicebot"
    return None


BOT_MISSING = bot_problem()
needs_bot = pytest.mark.skipif(BOT_MISSING is not None, reason=BOT_MISSING or "")


def _drain(stream: IO[str], seen: list[str]) -> None:
    for line in stream:
        seen.append(line)
        del seen[:-200]


@contextmanager
def voice_bot(*args: str) -> Iterator[str]:
    """Start the bot; yields its base ws:// URL (paths /twilio, /vonage, /telnyx). Stopped, and waited for, after."""
    process = subprocess.Popen([str(BOT_PYTHON), str(BOT_DIR / "bot.py"), *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        seen: list[str] = []
        assert process.stdout is not None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
            found = re.search(r"listening http://127\.0\.0\.1:(\d+)", line)
            if found:
                # its log keeps coming: read it, or a full pipe would stall the bot
                threading.Thread(target=_drain, args=(process.stdout, seen), daemon=True).start()
                yield f"ws://127.0.0.1:{found.group(1)}"
                return
        raise RuntimeError("the voice bot did not start:\n" + "".join(seen[-20:]))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


if __name__ == "__main__":  # a manual check: start it and print the URL
    with voice_bot(*sys.argv[1:]) as url:
        print(url)
