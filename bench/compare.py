"""Before and after a change, in the same run: tamesu's CPU per turn with the source of another commit against
the working tree's, and the bare loop's beside both.

    python bench/compare.py [--before REV] [--workload persona|rest] [--rounds R] [--small N] [--large N]
    python bench/compare.py --pairs P [--before REV] [--workload persona|rest] [--large N]

`--before` (default HEAD) is checked out with `git archive` into a temporary folder and the working tree's
`src/` is copied beside it when the run starts (so editing during a run changes nothing); each side runs
`python -m tamesu` with PYTHONPATH on its own copy, so the installed (editable) package does not decide
which code runs. The workloads are `bench/persona.py`'s (simulated users against `bench/model_server.py`,
OpenAI shape) and `bench/run.py`'s scripted REST conversations, 5 turns each, `--parallel` conversations
at once. Every round runs each side at two sizes, in an order that alternates between rounds, and takes the
slope (so start-up cancels out); the figures are the medians of the rounds. The machine is shared: only the
ratios measured in the same run mean anything.

`--pairs P` measures whole runs instead: P pairs of `tamesu run` of `--large` conversations, before and after back
to back (the order alternating), and the median of each pair's own after/before CPU ratio. Start-up is in each
figure, so the ratio understates a per-turn change, but two runs a few seconds apart share the machine's load:
at a load average of 17 the slopes' rounds read 0.28x to 1.35x for the same two commits (issue 28's third pass).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from persona import ModelServer  # noqa: E402  (bench/ is a folder of scripts, not a package)
from persona import write_suite as persona_suite  # noqa: E402
from run import PYTHON, ROOT, Agent, measure  # noqa: E402
from run import write_suite as rest_suite  # noqa: E402

TURNS = 5


def checkout(rev: str, into: Path) -> Path:
    """The `src/` of `rev`, extracted into `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def _tamesu(folder: Path, src: Path, suite: Path, parallel: int, extra: list[str]) -> float:
    out = folder / f"out-{time.monotonic_ns()}"
    measured = measure([PYTHON, "-m", "tamesu", "run", str(suite), "--parallel", str(parallel), "--out", str(out),
                        "--color", "never", *extra], cwd=folder,
                       # PWD as the child's own folder: a dev machine's hook that puts $PWD/src first (a worktree's
                       # source) would otherwise run the same code on both sides
                       env={"PYTHONPATH": str(src), "PWD": str(folder)})
    if measured.returncode != 0:
        raise SystemExit(f"tamesu ({src}) exited {measured.returncode}:\n{measured.stdout[-2000:]}")
    return measured.cpu_s


def _baseline(workload: str, model: ModelServer | None, agent: Agent, conversations: int, parallel: int) -> float:
    if workload == "persona":
        assert model is not None
        command = [PYTHON, str(BENCH / "persona_baseline.py"), model.url, f"{agent.url}/chat", "openai",
                   str(conversations), str(TURNS), str(parallel)]
    else:
        command = [PYTHON, str(BENCH / "baseline_client.py"), f"{agent.url}/chat", str(conversations), str(TURNS),
                   str(parallel)]
    measured = measure(command)
    if measured.returncode != 0:
        raise SystemExit(f"the baseline failed:\n{measured.stdout[-2000:]}")
    return measured.cpu_s


def compare(before: str, workload: str, rounds: int, small: int, large: int, parallel: int) -> dict[str, Any]:
    agent = Agent()
    model = ModelServer() if workload == "persona" else None
    slopes: dict[str, list[float]] = {"before": [], "after": [], "baseline": []}
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-compare-") as temporary:
            folder = Path(temporary)
            sources = {"before": checkout(before, folder / "before"),
                       "after": Path(shutil.copytree(ROOT / "src", folder / "after" / "src"))}
            if workload == "persona":
                assert model is not None
                suites = {n: persona_suite(folder, model.url, agent.url, "openai", n, TURNS) for n in (small, large)}
                extra = ["--no-cache"]
            else:
                suites = {n: rest_suite(folder, agent.url, n, TURNS) for n in (small, large)}
                extra = []
            for number in range(rounds):
                order = ["before", "after", "baseline"]
                order = order if number % 2 == 0 else order[::-1]
                for side in order:
                    cpu = {}
                    for n in (small, large):
                        cpu[n] = _baseline(workload, model, agent, n, min(parallel, n)) if side == "baseline" else \
                            _tamesu(folder, sources[side], suites[n], min(parallel, n), extra)
                    slopes[side].append((cpu[large] - cpu[small]) / ((large - small) * TURNS) * 1000)
    finally:
        agent.stop()
        if model is not None:
            model.stop()
    median = {side: statistics.median(values) for side, values in slopes.items()}
    return {"workload": workload, "before": before, "at_once": parallel, "sizes": [small, large], "rounds": rounds,
            "cpu_ms_per_turn": {side: round(value, 3) for side, value in median.items()},
            "rounds_ms_per_turn": {side: [round(v, 3) for v in values] for side, values in slopes.items()},
            "after_over_before": round(median["after"] / median["before"], 3),
            "before_over_baseline": round(median["before"] / median["baseline"], 2),
            "after_over_baseline": round(median["after"] / median["baseline"], 2),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def pairs(before: str, workload: str, count: int, conversations: int, parallel: int) -> dict[str, Any]:
    agent = Agent()
    model = ModelServer() if workload == "persona" else None
    cpu: dict[str, list[float]] = {"before": [], "after": []}
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-compare-") as temporary:
            folder = Path(temporary)
            sources = {"before": checkout(before, folder / "before"),
                       "after": Path(shutil.copytree(ROOT / "src", folder / "after" / "src"))}
            if workload == "persona":
                assert model is not None
                suite = persona_suite(folder, model.url, agent.url, "openai", conversations, TURNS)
                extra = ["--no-cache"]
            else:
                suite, extra = rest_suite(folder, agent.url, conversations, TURNS), []
            for number in range(count):
                for side in ("before", "after") if number % 2 == 0 else ("after", "before"):
                    cpu[side].append(_tamesu(folder, sources[side], suite, min(parallel, conversations), extra))
    finally:
        agent.stop()
        if model is not None:
            model.stop()
    ratios = [a / b for a, b in zip(cpu["after"], cpu["before"], strict=True)]
    return {"workload": workload, "before": before, "at_once": parallel, "conversations": conversations,
            "pairs": count, "cpu_s": {side: [round(v, 2) for v in values] for side, values in cpu.items()},
            "pair_ratios": [round(r, 3) for r in ratios], "after_over_before": round(statistics.median(ratios), 3),
            "load_average": [round(x, 1) for x in os.getloadavg()]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="HEAD")
    parser.add_argument("--workload", choices=["persona", "rest"], default="persona")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=300)
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--pairs", type=int, help="whole runs of --large conversations, before and after back to back")
    args = parser.parse_args()
    if args.pairs:
        found = pairs(args.before, args.workload, args.pairs, args.large, args.parallel)
        print(f"{args.workload}, {args.large} conversations, {args.parallel} at once: after/before CPU of whole runs "
              f"{found['after_over_before']}x (median of {args.pairs} pairs: {found['pair_ratios']}; load average "
              f"{found['load_average'][0]})")
        print(json.dumps(found, indent=1))
        return 0
    result = compare(args.before, args.workload, args.rounds, args.small, args.large, args.parallel)
    cpu = result["cpu_ms_per_turn"]
    print(f"{args.workload}, {args.parallel} at once: CPU per turn before ({args.before}) {cpu['before']} ms, "
          f"after {cpu['after']} ms ({result['after_over_before']}x), bare loop {cpu['baseline']} ms; "
          f"x the bare loop: before {result['before_over_baseline']}, after {result['after_over_baseline']} "
          f"(load average {result['load_average'][0]})")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
