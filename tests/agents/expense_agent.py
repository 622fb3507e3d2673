"""The example expense agent (examples/expense-agent/agent.py) served on a free 127.0.0.1 port, and `tamesu test`
run as a user runs it, for the JSONL tests."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import forked
from tamesu.net.serve import ThreadServer

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "expense-agent"


def _example_module() -> Any:
    spec = importlib.util.spec_from_file_location("expense_example_agent", EXAMPLE / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@dataclass
class ExpenseAgent:
    url: str
    store: Path
    """The history of the runs against the example: by default it is kept beside the example's tamesu.yaml, in
    the source tree (tests/source_tree.py)."""

    @property
    def env(self) -> dict[str, str]:
        return {"EXPENSE_URL": self.url, "TAMESU_STORE": str(self.store)}


@pytest.fixture(scope="module")
def expense_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExpenseAgent]:
    server = ThreadServer(_example_module().create_app()).start()
    try:
        yield ExpenseAgent(server.url, tmp_path_factory.mktemp("history") / "store.db")
    finally:
        server.stop()


def run_test(args: list[str], cwd: Path = EXAMPLE, env: dict[str, str] | None = None, stdin: str | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`tamesu test ARGS` in a child process, as a user types it (forked from a warm process: tests/forked.py)."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    full_env.pop("TAMESU_DEBUG", None)
    # no stdin unless the test gives one: a run that asked a person would otherwise wait on pytest's
    return forked.run(["test", *args], cwd, full_env, timeout, subprocess.DEVNULL if stdin is None else stdin)
