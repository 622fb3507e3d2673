"""`tamesu doctor` lists every extra and system package, whether it is there and the one command that adds it
(issue 32, item 4); `tamesu[all]` is every extra but embeddings, and doctor's table is pyproject's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from hidden_modules import hiding
from tamesu.cli.installed import ALL_COMMAND, EXTRAS, SYSTEM

ROOT = Path(__file__).resolve().parents[2]


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_doctors_table_is_pyprojects_extras_and_all_is_every_one_but_embeddings() -> None:
    declared = _extras()
    assert declared["all"] == ["tamesu[" + ",".join(e.name for e in EXTRAS if e.name != "embeddings") + "]"]
    for extra in EXTRAS:
        packages = {_name(r) for r in declared[extra.name] if not r.startswith("tamesu[")}
        assert {_name(p) for p in extra.modules.values()} == packages, extra.name
    assert set(declared) - {"dev", "all"} == {e.name for e in EXTRAS}


def test_doctor_says_what_is_missing_and_the_one_command_that_adds_it(tmp_path: Path) -> None:
    # the machine has everything: hide the browser and otel extras' modules and every system binary
    hidden = ["playwright", "numpy", "opentelemetry.sdk", "opentelemetry.exporter"]  # (opentelemetry.proto: core)
    hide = hiding(tmp_path, *hidden)
    (tmp_path / "bin").mkdir()
    (tmp_path / "tamesu.yaml").write_text("")
    (tmp_path / "s.tamesu.yaml").write_text("targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
                                            "tests:\n  - name: t\n    target: bot\n"
                                            "    scenario: { script: [ { say: hi } ] }\n")
    env = {**os.environ, "NO_COLOR": "1", "PATH": str(tmp_path / "bin"),
           "PYTHONPATH": os.pathsep.join([str(hide), os.environ.get("PYTHONPATH", "")])}
    env.pop("TAMESU_CHROMIUM", None)
    done = subprocess.run([sys.executable, "-m", "tamesu", "doctor"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr  # a missing option is a warning, never a failure
    lines = done.stdout.splitlines()
    assert "warn  extra browser: missing playwright, numpy (browser targets); add it: pip install " \
        "'tamesu[browser]'" in lines
    assert "warn  extra otel: missing opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http (tamesu's own " \
        "OpenTelemetry spans); add it: pip install 'tamesu[otel]'" in lines
    assert "warn  system chromium: not found (browser targets); add it: apt-get install chromium " \
        "fonts-liberation" in lines
    for package in SYSTEM:
        assert any(line.startswith(f"warn  system {package.name}: not found") and line.endswith(package.command)
                   for line in lines), package.name
    assert f"warn  every extra but embeddings at once: {ALL_COMMAND}" in lines
    # the rest of the extras are there on this machine (make test installs .[dev,all]), each said once
    for extra in EXTRAS:
        said = [line for line in lines if line.startswith(("ok    extra ", "warn  extra ")) and
                line.split()[2] == f"{extra.name}:"]
        assert len(said) == 1, extra.name
