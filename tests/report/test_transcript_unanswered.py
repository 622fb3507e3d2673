"""`-v` prints the transcript of a run that did not pass: one whose first turn was never answered (the agent
unreachable) printed its heading with nothing under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ports import refused_port


def test_verbose_says_a_run_had_no_turn_answered(tmp_path: Path, tamesu: Any) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(f"""\
targets:
  shop: {{ type: rest, url: "http://127.0.0.1:{refused_port()}/chat", connect: {{ attempts: 1 }} }}
tests:
  - {{ name: t, target: shop, scenario: {{ script: [ {{ say: hello }} ] }} }}
""")
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out", "-v"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    heading = next(line for line in lines if "transcript of" in line)
    assert heading == "    transcript of t, run 1: no turn was answered", lines
