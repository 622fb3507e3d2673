"""Where the scripted REST ratio goes: what a test costs apart from its turns, and what one more turn costs,
for tamesu and the bare httpx loop, in the same run.

    python bench/cost_split.py [--parallel 100] [--rounds 3]

Four runs per side and round: 100 and 500 conversations of 1 turn and of 9 turns. The slope between the two
conversation counts gives the CPU of one conversation (start-up cancels out) at 1 and at 9 turns; a turn is
the difference over 8, and a test's own cost (its plan entry, run folder, results line, report section; for
the loop, the client and the connection) is the 1-turn conversation less its turn. Rounds alternate the
sides; each figure is the median of the rounds. tamesu's run folders go to tmpfs as in `bench/run.py`. The
loop runs on httpx's transport and again on tamesu's own (`bench/baseline_client.py ... tamesu`), so what the
engine adds over the same wire code is read apart from what the transport saves.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from run import TAMESU, Agent, measure, run_baseline, tmpfs_root, write_suite

SMALL, LARGE = 100, 500


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    agent = Agent()
    out_root = tmpfs_root()
    sides = ("tamesu", "loop", "loop on tamesu's transport")
    figures: dict[str, dict[str, list[float]]] = {side: {"test": [], "turn": []} for side in sides}
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-split-") as temporary:
            folder = Path(temporary)
            suites = {(n, turns): write_suite(folder, agent.url, n, turns) for n in (SMALL, LARGE) for turns in (1, 9)}
            for number in range(args.rounds):
                for side in sides if number % 2 == 0 else sides[::-1]:
                    cpu: dict[tuple[int, int], float] = {}
                    for (n, turns), suite in suites.items():
                        at_once = min(args.parallel, n)
                        if side.startswith("loop"):
                            transport = "tamesu" if side.endswith("transport") else "httpx"
                            measured = run_baseline(agent.url, n, turns, at_once, transport)
                        else:
                            out = (out_root or folder) / f"out-{time.monotonic_ns()}"
                            measured = measure([*TAMESU, "run", str(suite), "--parallel", str(at_once), "--out",
                                                str(out), "--color", "never"], cwd=folder)
                            shutil.rmtree(out, ignore_errors=True)
                        if measured.returncode != 0:
                            raise SystemExit(f"{side} exited {measured.returncode}:\n{measured.stdout[-2000:]}")
                        cpu[(n, turns)] = measured.cpu_s
                    one = (cpu[(LARGE, 1)] - cpu[(SMALL, 1)]) / (LARGE - SMALL)
                    nine = (cpu[(LARGE, 9)] - cpu[(SMALL, 9)]) / (LARGE - SMALL)
                    turn = (nine - one) / 8
                    figures[side]["turn"].append(turn * 1000)
                    figures[side]["test"].append((one - turn) * 1000)
    finally:
        agent.stop()
        if out_root is not None:
            shutil.rmtree(out_root, ignore_errors=True)
    print(f"{args.parallel} at once, {args.rounds} rounds (median; each round in brackets), CPU in ms")
    for what in ("test", "turn"):
        label = "a test apart from its turns" if what == "test" else "one more turn"
        for loop in sides[1:]:
            ours, theirs = (statistics.median(figures[s][what]) for s in ("tamesu", loop))
            rounds = ", ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(figures["tamesu"][what], figures[loop][what],
                                                                 strict=True))
            print(f"  {label:28s} tamesu {ours:.3f}  {loop} {theirs:.3f}  tamesu - {loop} {ours - theirs:+.3f}  "
                  f"[{rounds}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
