"""The "your own bot" recipe of the `voice` target (docs/voice-targets.md) runs as written: the bot from the page,
started as a process on a free port, passes the suite from the page under `tamesu run`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tamesu.audio.extra import problem

pytestmark = pytest.mark.audio

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "voice-targets.md"


def _recipe() -> tuple[str, str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split("### A `voice` websocket bot", 1)[1].split("\n### ", 1)[0]
    bot = re.search(r"```python\n(.*?)```", section, re.S)
    suite = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert bot and suite, "the recipe's bot and suite blocks"
    return bot.group(1), suite.group(1)


def test_the_voice_bot_recipe_passes_its_suite(tmp_path: Path) -> None:
    missing = problem() or (None if shutil.which("espeak-ng") else "Debian's espeak-ng is not installed")
    if missing:
        pytest.skip(missing)
    bot_code, suite = _recipe()
    (tmp_path / "bot.py").write_text(bot_code)
    (tmp_path / "suite.yaml").write_text(suite)
    bot = subprocess.Popen([sys.executable, str(tmp_path / "bot.py"), "0"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        assert bot.stdout is not None
        url: list[str] = []
        first_line = bot.stdout.readline
        reader = threading.Thread(target=lambda: url.extend(re.findall(r"listening (ws://\S+)", first_line())))
        reader.start()
        reader.join(timeout=60)
        assert url, "the bot never said where it listens"
        env = {**os.environ, "BOT_URL": url[0], "TAMESU_STORE": "off", "NO_COLOR": "1"}
        run = subprocess.run([sys.executable, "-m", "tamesu", "run", "suite.yaml", "--out", str(tmp_path / "runs")],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "opening hours" in run.stdout
    finally:
        bot.terminate()
        bot.wait(timeout=10)
