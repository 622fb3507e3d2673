"""The bench's agents end with the bench script, however it ends: a test's timeout kills the script with SIGKILL
(subprocess.run's timeout), where no `finally` runs, and its agents were left running under pid 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lifeline import alive as _alive
from lifeline import tied

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _children(pid: int) -> list[tuple[int, str]]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent) == pid:
            found.append((int(entry), command))
    return found


def test_a_bench_script_killed_by_sigkill_takes_its_agent_with_it() -> None:
    bench = subprocess.Popen(tied([sys.executable, str(BENCH / "turn_calls.py"), "--workload", "rest", "--small", "50",
                                    "--large", "400", "--at-once", "10"]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    agent = None
    try:
        deadline = time.monotonic() + 60
        while agent is None and time.monotonic() < deadline and bench.poll() is None:
            agent = next((pid for pid, command in _children(bench.pid) if "bench/agents.py" in command), None)
            time.sleep(0.1)
        assert agent is not None, "the bench started its agent (bench/agents.py)"
        time.sleep(0.5)  # the agent listening: what a timeout meets
        bench.send_signal(signal.SIGKILL)
        bench.wait(10)
        deadline = time.monotonic() + 15
        while _alive(agent) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(agent), f"bench/agents.py (pid {agent}) outlived the bench killed with SIGKILL"
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait(10)
        if agent is not None and _alive(agent):
            os.kill(agent, signal.SIGKILL)
