"""What borrowing warm speech workers saves a run: `python bench/speech_keeper.py [ROUNDS]`.

The same audio `tamesu run` (one Realtime call of two turns against the reference agent,
examples/realtime-agent, in this process) ROUNDS times (default 4), each round once with the run's own speech
workers and once with workers borrowed from a keeper (`python -m tamesu.audio.keeper`, `TAMESU_SPEECH_KEEPER`),
in turn, so both see the same machine, after one borrowed run that starts the keeper's workers. Prints each
run's wall clock and CPU: the run's process tree from wait4 plus, for the borrowed workers, the CPU the keeper's
workers spent meanwhile (read from /proc: they are the keeper's children, not the run's), and the load average
as it ended.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SUITE = """targets:
  bella: {{ type: realtime, url: "{url}", mode: audio, turn_detection: commit }}
tests:
  - name: call
    target: bella
    scenario:
      script:
        - say: "Hello, I would like to book a table for two on Friday"
        - say: "Yes please, seven is perfect"
"""
TICK = os.sysconf("SC_CLK_TCK")


def _children_cpu(pid: int) -> float:
    total = 0.0
    for thread in os.listdir(f"/proc/{pid}/task"):
        for child in Path(f"/proc/{pid}/task/{thread}/children").read_text().split():
            try:
                fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def main() -> None:
    from agents.voice import agent_module

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    agent = agent_module().ThreadAgent()
    folder = Path(tempfile.mkdtemp(prefix="tamesu-bench-keeper-"))
    (folder / "suite.yaml").write_text(SUITE.format(url=agent.url), encoding="utf-8")
    socket_path = folder / "keeper.socket"
    keeper = subprocess.Popen([sys.executable, "-m", "tamesu.audio.keeper", str(socket_path)],
                              stdout=subprocess.PIPE, text=True)
    assert keeper.stdout is not None
    keeper.stdout.readline()
    rows: dict[str, list[tuple[float, float]]] = {"own": [], "borrowed": []}
    try:
        # one borrowed run first, unmeasured: the keeper's workers start and load once, as in a test run's first
        # audio run; what is measured is every run after it
        subprocess.run([sys.executable, "-m", "tamesu", "run", "suite.yaml", "--out", "out"], cwd=folder,
                       env={**os.environ, "TAMESU_STORE": "off", "TAMESU_SPEECH_KEEPER": str(socket_path)},
                       capture_output=True, timeout=300)
        for _ in range(rounds):
            for mode in rows:
                env = {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": "off"}
                if mode == "borrowed":
                    env["TAMESU_SPEECH_KEEPER"] = str(socket_path)
                kept_before = _children_cpu(keeper.pid)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.monotonic()
                done = subprocess.run([sys.executable, "-m", "tamesu", "run", "suite.yaml", "--out", "out"],
                                      cwd=folder, env=env, capture_output=True, text=True, timeout=300)
                wall = time.monotonic() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                       + _children_cpu(keeper.pid) - kept_before)
                if done.returncode != 0:
                    print(done.stdout, done.stderr, file=sys.stderr)
                rows[mode].append((wall, cpu))
                print(f"{mode:8} wall {wall:6.2f} s  cpu {cpu:5.2f} s  exit {done.returncode}  "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        keeper.terminate()
        keeper.wait()
        agent.stop()
    for mode, got in rows.items():
        walls, cpus = sorted(w for w, _ in got), sorted(c for _, c in got)
        print(f"{mode:8} median wall {walls[len(walls) // 2]:.2f} s, cpu {cpus[len(cpus) // 2]:.2f} s")


if __name__ == "__main__":
    from _owned import own_children

    own_children()
    main()
