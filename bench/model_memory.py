"""Before and after a change, one `tamesu run` at a time: peak memory, CPU and wall time of a persona run
(N conversations x 5 simulated-user turns, `--parallel P`) against `bench/model_server.py` and
`bench/agents.py`, for the OpenAI and the Anthropic shape, with the source of another commit and the working
tree's alternating, and which provider SDKs the run imported.

    python bench/model_memory.py [--before REV] [--shape openai|anthropic|both] [--conversations N]
                                 [--parallel P] [--rounds R]

Each side runs `python -m tamesu` with PYTHONPATH on its own copy of `src/` (as `bench/compare.py` does);
CPU and peak RSS come from `wait4`, so the servers' work never counts. The figures are the medians of the
rounds, and every round's are printed: the machine is shared, only figures of one run compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import checkout  # noqa: E402  (bench/ is a folder of scripts, not a package)
from persona import ModelServer, write_suite  # noqa: E402
from run import PYTHON, ROOT, Agent, measure  # noqa: E402

TURNS = 5
# the CLI as `python -m tamesu` runs it, and at exit which provider SDKs were ever imported
_WRAPPER = ("import atexit, json, os, runpy, sys\n"
            "atexit.register(lambda: open(os.environ['SDKS_FILE'], 'w').write(json.dumps(sorted(\n"
            "    n for n in ('openai', 'anthropic') if n in sys.modules))))\n"
            "sys.argv[0] = 'tamesu'\n"
            "runpy.run_module('tamesu', run_name='__main__', alter_sys=True)\n")


def one_run(folder: Path, src: Path, suite: Path, parallel: int) -> dict[str, Any]:
    out = folder / f"out-{time.monotonic_ns()}"
    sdks = folder / f"sdks-{time.monotonic_ns()}.json"
    measured = measure([PYTHON, "-c", _WRAPPER, "run", str(suite), "--parallel", str(parallel), "--out", str(out),
                        "--color", "never", "--no-cache"], cwd=folder,
                       env={"PYTHONPATH": str(src), "SDKS_FILE": str(sdks)})
    if measured.returncode != 0:
        raise SystemExit(f"tamesu ({src}) exited {measured.returncode}:\n{measured.stdout[-2000:]}")
    passed = sum(1 for found in out.glob("*/results.jsonl") for line in found.read_text().splitlines()
                 if json.loads(line).get("status") == "passed")
    shutil.rmtree(out)
    return {"peak_rss_mib": round(measured.peak_rss_mib, 1), "cpu_s": round(measured.cpu_s, 2),
            "wall_s": round(measured.wall_s, 2), "passed": passed, "sdks": json.loads(sdks.read_text())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="HEAD")
    parser.add_argument("--shape", choices=["openai", "anthropic", "both"], default="both")
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shapes = ["openai", "anthropic"] if args.shape == "both" else [args.shape]
    agent, model = Agent(), ModelServer()
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {shape: {"before": [], "after": []} for shape in shapes}
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-model-memory-") as temporary:
            folder = Path(temporary)
            sources = {"before": checkout(args.before, folder / "before"),
                       "after": Path(shutil.copytree(ROOT / "src", folder / "after" / "src"))}
            for shape in shapes:
                suite = write_suite(folder, model.url, agent.url, shape, args.conversations, TURNS)
                for number in range(args.rounds):
                    for side in ("before", "after") if number % 2 == 0 else ("after", "before"):
                        row = one_run(folder, sources[side], suite, args.parallel)
                        rows[shape][side].append(row)
                        print(f"{shape} {side}: {row}", flush=True)
    finally:
        agent.stop()
        model.stop()
    for shape, sides in rows.items():
        keys = ("peak_rss_mib", "cpu_s", "wall_s")
        median = {side: {key: round(statistics.median(r[key] for r in runs), 2) for key in keys}
                  for side, runs in sides.items()}
        print(f"{shape}, {args.conversations} conversations at --parallel {args.parallel}, median of {args.rounds}: "
              f"peak RSS {median['before']['peak_rss_mib']} -> {median['after']['peak_rss_mib']} MiB, "
              f"CPU {median['before']['cpu_s']} -> {median['after']['cpu_s']} s, "
              f"wall {median['before']['wall_s']} -> {median['after']['wall_s']} s; SDKs imported: before "
              f"{sides['before'][0]['sdks']}, after {sides['after'][0]['sdks']} "
              f"(load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
