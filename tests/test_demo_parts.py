"""`make demo`'s voice and browser parts (issue 32, item 3) on a machine without what they need: each says in
one line what to install and lets the demo go on, and the demo's last words name the reports it just wrote.
(The parts themselves are the example suites that test_realtime_target.py and test_browser_target.py run.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_without_chromium_the_browser_part_is_one_line_saying_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no chromium on it
    env.pop("TAMESU_CHROMIUM", None)
    done = _script("demo_web.py", "--persona", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["demo: the browser part is skipped: it needs Chromium and the browser "
                                        "extra: apt-get install chromium fonts-liberation"]


def test_the_demo_ends_with_the_reports_it_wrote_and_how_to_open_the_history(tmp_path: Path) -> None:
    done = _script("demo_end.py", "0", env=dict(os.environ))  # nothing newer than now: no report named
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "demo: the HTML reports (open them in a browser):"
    assert lines[-1].strip().startswith(".venv/bin/tamesu view ")
    assert not any("report.html" in line for line in lines)
