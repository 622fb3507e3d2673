"""The persona workload at 1000 at once on a machine kept busy: does every conversation still pass?

    python bench/under_load.py [--conversations 2000] [--parallel 1000] [--busy 2] [--rounds 2]

`--busy` processes spin beside the run (the machine's cores taken, as by other jobs), so tamesu's event loop
lags by seconds: the wait between two turns of a conversation then passes the agent's keep-alive time
(uvicorn's 5 s), and its server closes the connection as the next turn goes out on it. Before tamesu sent such
a turn again on a new connection (then `tamesu.net.resend`, now `tamesu.net.aio`), 595 of 2000 conversations
failed with `Broken pipe`
here. Prints, per round, tamesu's exit code, how many tests did not pass and why, and how many turns were sent
again (`resent` events).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from persona import ModelServer, _why_not_passed, write_suite
from run import PYTHON, TAMESU, Agent, tmpfs_root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--parallel", type=int, default=1000)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    model, agent = ModelServer(), Agent()
    busy = [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(args.busy)]
    out_root = tmpfs_root()
    failed_rounds = 0
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-under-load-") as temporary:
            folder = Path(temporary)
            suite = write_suite(folder, model.url, agent.url, "openai", args.conversations, 5)
            for number in range(1, args.rounds + 1):
                out = (out_root or folder) / f"out-{number}"
                started = time.monotonic()
                done = subprocess.run([*TAMESU, "run", str(suite), "--parallel", str(args.parallel), "--out",
                                       str(out), "--color", "never", "--no-cache"], cwd=folder, capture_output=True,
                                      text=True, timeout=3600)
                results = [json.loads(found.read_text()) for found in out.glob("*/*/*/run-*/result.json")]
                resent = sum(1 for r in results for e in r.get("events", []) if e.get("name") == "resent")
                not_passed = sum(1 for r in results if r.get("status") != "passed")
                print(f"round {number}: exit {done.returncode}, {len(results)} results, {not_passed} not passed, "
                      f"{resent} turns sent again, {time.monotonic() - started:.0f} s", flush=True)
                if done.returncode != 0:
                    failed_rounds += 1
                    print(_why_not_passed(out), flush=True)
                shutil.rmtree(out, ignore_errors=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()
        model.stop()
        agent.stop()
        if out_root is not None:
            shutil.rmtree(out_root, ignore_errors=True)
    return 1 if failed_rounds else 0


if __name__ == "__main__":
    from _owned import own_children

    own_children()
    raise SystemExit(main())
