"""The forked `tamesu` runs (tests/forked.py) stand in for `python -m tamesu` only where they are the same: each
case runs both ways and compares exit code, stdout and stderr."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import forked

SHOP = Path(__file__).resolve().parent.parent / "examples" / "rest-shop"
ENV = {key: value for key, value in os.environ.items() if key not in ("TAMESU_DEBUG", "SHOP_URL")}
ENV.update(NO_COLOR="1", COLUMNS="200")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    for name in ("tamesu.yaml", "shop.tamesu.yaml", "fake-rules.yaml", "order_cases.csv"):
        shutil.copy(SHOP / name, tmp_path / name)
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    return tmp_path


def _same(args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    feed = {"input": stdin} if stdin is not None else {}
    plain = subprocess.run([sys.executable, "-m", "tamesu", *args], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=120, **feed)  # type: ignore[call-overload]  # input= or nothing
    fork = forked.run(args, cwd, env, 120, stdin)
    assert (fork.returncode, fork.stdout, fork.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    return fork


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["--help"], 0), (["nope"], 2),
                                            (["validate", "missing.yaml"], 2), (["validate"], 0),
                                            (["validate", "bad.yaml"], 2)])
def test_a_fork_answers_as_the_interpreter_does(shop: Path, args: list[str], code: int) -> None:
    assert _same(args, shop, ENV).returncode == code


def test_a_fork_takes_the_callers_folder_environment_and_stdin(shop: Path) -> None:
    unset = _same(["validate"], shop, ENV, stdin="ignored\n")
    assert "SHOP_URL is not set" in unset.stderr
    given = _same(["validate"], shop, {**ENV, "SHOP_URL": "http://127.0.0.1:9"})
    assert given.returncode == 0 and "SHOP_URL" not in given.stderr
    assert "TAMESU_OWNERS" not in os.environ  # the caller's own environment is untouched


def test_a_fork_that_outlives_its_timeout_is_killed(shop: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):  # `view` serves until it is stopped
        forked.run(["view", "--port", "0", "--no-open"], shop, {**ENV, "TAMESU_STORE": str(shop / "s.db")}, 3)
