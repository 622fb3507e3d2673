"""The command line's last resort: a bug of ours that escapes every run is one `internal error` line (or, with
TAMESU_DEBUG=1, its traceback). Its words are an exception's, which can quote what a template put in: a secret
there was printed as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "S3cr3t+/=&Zq-4711"

# a command that reads a secret as a run does (so the process's redactor knows it), then fails with it in words
_CRASH = f"""
import click
from tamesu.cli.main import entry
from tamesu.suite.secrets import Secrets

@click.command()
def crash():
    value = Secrets(environ={{"TOKEN": {SECRET!r}}})("TOKEN")
    raise ValueError(f"cannot parse http://user:{{value}}@host/ (key {{value.encode().hex()}})")

entry(crash)
"""


@pytest.mark.parametrize("debug", [False, True], ids=["line", "traceback"])
def test_an_internal_error_never_says_a_secret(tmp_path: Path, debug: bool) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TAMESU_DEBUG"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2] / "src")
    if debug:
        env["TAMESU_DEBUG"] = "1"
    done = subprocess.run([sys.executable, "-c", _CRASH], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert "ValueError: cannot parse http://user:***@host/ (key ***)" in said, said
    assert SECRET not in said and SECRET.encode().hex() not in said, said
    assert ("Traceback" in said) == debug, said
