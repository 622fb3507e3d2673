"""Starting and stopping an example agent for the demo scripts: its output goes to a log file (a pipe nobody
reads would stall a chatty agent), its addresses are read from what it prints, and it is stopped with
SIGTERM, then killed if it lingers."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _printed(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")


def stop(agent: subprocess.Popen[str]) -> None:
    agent.terminate()
    try:
        agent.wait(timeout=10)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait(timeout=5)


@contextmanager
def running(what: str, args: list[str], addresses: dict[str, str], env: dict[str, str] | None = None,
            timeout: float = 30) -> Iterator[tuple[dict[str, str], Path]]:
    """Run `python ARGS` until the block ends; yields the addresses found (each name's regex, group 1, in
    what it printed) and the log file. An agent that exits or stays silent is one line naming `what`."""
    patterns = {name: re.compile(regex) for name, regex in addresses.items()}
    with tempfile.NamedTemporaryFile("w+", prefix="tamesu-demo-", suffix=".log", encoding="utf-8") as log:
        agent = subprocess.Popen([*python_command(os.environ if env is None else env), *args], stdout=log,
                                 stderr=subprocess.STDOUT, text=True, env=env)
        try:
            deadline, found = time.monotonic() + timeout, {}
            while time.monotonic() < deadline and agent.poll() is None:
                printed = _printed(Path(log.name))
                found = {name: m.group(1) for name, regex in patterns.items() if (m := regex.search(printed))}
                if len(found) == len(patterns):
                    break
                time.sleep(0.05)
            if len(found) < len(patterns):
                raise SystemExit(f"the {what} did not start within {timeout:g} s:\n{_printed(Path(log.name))}")
            yield found, Path(log.name)
        finally:
            stop(agent)


def python_command(env: Mapping[str, str]) -> list[str]:
    """How a demo starts its agent's `python`: `TAMESU_DEMO_PYTHON` (a command line, split as a shell splits it)
    when set (in the tests a launcher that runs the agent as a fork of a warm process that has imported its SDKs,
    tests/forked.py), else this Python."""
    given = env.get("TAMESU_DEMO_PYTHON", "").strip()
    return shlex.split(given) if given else [sys.executable]


def tamesu_command(env: dict[str, str]) -> list[str]:
    """How a demo starts tamesu: `TAMESU_COMMAND` (a command line, split as a shell splits it) when set, to run
    another tamesu (an installed one; in the tests a fork of a warm process, tests/forked.py, which spares each
    demo a second of imports), else this Python's `-m tamesu`."""
    given = env.get("TAMESU_COMMAND", "").strip()
    return shlex.split(given) if given else [sys.executable, "-m", "tamesu"]


def run_suite(example: Path, tamesu_args: list[str], env: dict[str, str], log: Path | None = None) -> int:
    """`tamesu run EXAMPLE ...` from the project's root; on a failure the agent's log is shown."""
    code = subprocess.call([*tamesu_command(env), "run", str(example), *tamesu_args], env=env, cwd=ROOT)
    if code != 0 and log is not None:
        print("demo: what the agent printed:\n" + _printed(log), file=sys.stderr)
    return code
