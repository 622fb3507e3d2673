"""The results store's benchmark: `python bench/store.py` (or `make bench-store`). Refreshes the store table
in docs/performance.md and writes bench/results/<date>-store.json.

1. What the store costs a run, on two workloads: 1000 scripted conversations of 5 turns against the
   benchmark's echo agent, and 500 persona conversations of 5 turns (a simulator call per turn against
   bench/model_server.py; `--no-persona` leaves them out). Each is run with the store off and with the SQLite
   store on (created once beforehand, as a project's store is), in `--rounds` pairs in alternating order: the
   median of each pair's ratio, wall and CPU. On a loaded machine one run's CPU swings by a fifth between
   rounds, more than the store costs, so the store's own CPU is also measured alone (bench/store_own.py: the
   same run folder written to the store as `tamesu run` writes it, both threads) and set against the run's
   CPU with the store off. Goal: at most 1.05 (5%).
2. `tamesu view`'s page time on a store of 10,000 runs of 100 tests (1,000,000 test results, each with one
   run with three metrics, and two assertions), served by the real app over HTTP on 127.0.0.1: the median of
   5 requests per page after one warm-up. Goal: under 300 ms per page.

`--quick` runs 200 conversations and a store of 1,000 runs of 100 tests, and writes nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persona import ModelServer
from persona import write_suite as persona_suite
from run import Agent, measure, write_suite

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
TAMESU = [sys.executable, "-m", "tamesu"]


def _paired(folder: Path, name: str, suite: Path, store_file: Path, rounds: int,
            extra: list[str]) -> dict[str, Any]:
    """`rounds` pairs of runs of `suite`, store off and on, back to back in alternating order; the median of
    each pair's own ratio (the machine's speed drifts between minutes, two runs side by side drift together),
    and the medians of the times themselves."""
    walls: dict[str, list[float]] = {"off": [], "sqlite": []}
    cpus: dict[str, list[float]] = {"off": [], "sqlite": []}
    last_off: Path | None = None
    for round_number in range(rounds):
        for mode in ("off", "sqlite") if round_number % 2 == 0 else ("sqlite", "off"):
            env = {"TAMESU_STORE": "off" if mode == "off" else str(store_file), "NO_COLOR": "1"}
            out = folder / f"out-{name}-{mode}-{round_number}"
            measured = measure([*TAMESU, "run", str(suite), "--parallel", "100", "--out", str(out), *extra],
                               env=env, cwd=folder)
            if measured.returncode != 0 or "warning" in measured.stdout:
                raise SystemExit(f"the {name} {mode} run failed:\n{measured.stdout[-2000:]}")
            walls[mode].append(measured.wall_s)
            cpus[mode].append(measured.cpu_s)
            if mode == "off":
                last_off = out
    assert last_off is not None
    run_dir = next(found.parent for found in last_off.glob("*/results.jsonl"))
    return {"workload": name, "rounds": rounds, "walls": walls, "cpus": cpus, "run_dir": str(run_dir),
            "wall_off_s": statistics.median(walls["off"]), "wall_sqlite_s": statistics.median(walls["sqlite"]),
            "cpu_off_s": statistics.median(cpus["off"]), "cpu_sqlite_s": statistics.median(cpus["sqlite"]),
            "ratio": statistics.median(on / off for on, off in zip(walls["sqlite"], walls["off"], strict=True)),
            "cpu_ratio": statistics.median(on / off for on, off in zip(cpus["sqlite"], cpus["off"], strict=True))}


def own_cpu(run_dir: str, url: str, kind: str, reps: int) -> float:
    """The median CPU the store itself costs one run (bench/store_own.py): `lite` as a run writes a current
    SQLite store, `full` through SQLAlchemy as every run did before."""
    samples = []
    for _ in range(reps):
        done = measure([sys.executable, str(Path(__file__).parent / "store_own.py"), run_dir, url, kind])
        if done.returncode != 0:
            raise SystemExit(f"store_own {kind} failed:\n{done.stdout[-2000:]}")
        samples.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def store_cost(folder: Path, conversations: int, rounds: int, persona: bool) -> dict[str, Any]:
    agent = Agent()
    model = ModelServer() if persona else None
    try:
        # a project's store exists after its first run: create it first, and time that one-off apart
        store_file = folder / "store.db"
        url = f"sqlite:///{store_file}"
        created = measure([*TAMESU, "store", "migrate", "--store", url], cwd=folder)
        if created.returncode != 0:
            raise SystemExit(f"the store could not be created:\n{created.stdout}")
        workloads = [_paired(folder, "rest", write_suite(folder, agent.url, conversations, 5), store_file, rounds, [])]
        if model is not None:
            suite = persona_suite(folder, model.url, agent.url, "openai", conversations // 2, 5)
            workloads.append(_paired(folder, "persona", suite, store_file, rounds, ["--no-cache"]))
    finally:
        agent.stop()
        if model is not None:
            model.stop()
    for workload in workloads:
        workload["own_lite_s"] = own_cpu(workload["run_dir"], url, "lite", rounds)
        workload["own_full_s"] = own_cpu(workload["run_dir"], url, "full", rounds)
        workload["own_share"] = workload["own_lite_s"] / workload["cpu_off_s"]
        workload["conversations"] = conversations if workload["workload"] == "rest" else conversations // 2
    return {"workloads": workloads, "create_cpu_s": created.cpu_s}


def fill(url: str, runs: int, tests: int) -> float:
    """A store with `runs` runs of `tests` tests, written in bulk; the seconds it took."""
    import sqlalchemy as sa

    from tamesu.store import _tables as t
    from tamesu.store.db import Store

    started = time.perf_counter()
    store = Store(url)
    store.migrate()
    rng = random.Random(7)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    result_id = run_row = 0
    with store.engine.begin() as connection:
        for number in range(runs):
            run_id = f"run-{number:05d}"
            when = (base + dt.timedelta(minutes=10 * number)).isoformat()
            commit = f"{number // 5:040x}"
            connection.execute(t.runs.insert().values(id=run_id, started_at=when, commit=commit, branch="main"))
            part = connection.execute(t.run_parts.insert().values(
                run_id=run_id, dir=f"/runs/{run_id}", started_at=when, finished_at=when, exit_code=0,
                counts={"passed": tests, "failed": 0, "error": 0, "quarantined": 0, "skipped": 0, "total": tests},
            ).returning(t.run_parts.c.id)).scalar_one()
            results, test_runs, assertions = [], [], []
            for index in range(tests):
                result_id += 1
                run_row += 1
                passed = rng.random() > (0.3 if index % 10 == 0 else 0.01)
                status = "passed" if passed else "failed"
                results.append({"id": result_id, "run_id": run_id, "part_id": part, "test_id": f"suite/test-{index}",
                                "suite": "suite", "name": f"test-{index}", "status": status, "passed_runs": int(passed),
                                "total_runs": 1, "duration_ms": 100.0, "commit": commit, "started_at": when,
                                "slo": {"turn_latency_ms_p95": 800.0}})
                transcript = [{"role": "user", "text": f"hello {index}", "turn": 1},
                              {"role": "agent", "text": "echo" if passed else "oops", "turn": 1}]
                latency = rng.gauss(500, 150)
                test_runs.append({"id": run_row, "test_result_id": result_id, "number": 1, "attempt": 1,
                                  "status": status, "dir": f"suite/test-{index}/run-1", "transcript": transcript,
                                  "transcript_hash": f"{index:04d}{int(passed)}",
                                  "metrics": {"turn_latency_ms_p95": latency, "turns": 1.0, "llm_tokens": 120.0}})
                assertions.append({"test_run_id": run_row, "name": "contains", "passed": passed, "reason": ""})
                assertions.append({"test_run_id": run_row, "name": "judge", "passed": passed, "reason": "ok",
                                   "model": "openai:gpt" if number % 2 else "anthropic:claude",
                                   "prompt_version": "judge.v1", "score": 1.0 if passed else 0.0})
            connection.execute(t.test_results.insert(), results)
            connection.execute(t.test_runs.insert(), test_runs)
            connection.execute(t.assertions.insert(), assertions)
    with store.engine.connect() as connection:
        connection.execute(sa.text("ANALYZE"))
    store.close()
    return time.perf_counter() - started


def page_times(url: str, runs: int) -> dict[str, float]:
    import httpx

    from tamesu.net.serve import ThreadServer
    from tamesu.store.db import Store
    from tamesu.view.app import create_app

    store = Store(url)
    server = ThreadServer(create_app(store)).start()
    pages = {"runs": "/", "tests": "/tests", "a test's history": "/test?id=suite/test-10",
             "one run": f"/run?id=run-{runs - 1:05d}",
             "two runs compared": f"/compare?a=run-{runs - 2:05d}&b=run-{runs - 1:05d}", "judge drift": "/drift"}
    times: dict[str, float] = {}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for name, path in pages.items():
                assert client.get(path).status_code == 200, path
                samples = []
                for _ in range(5):
                    started = time.perf_counter()
                    response = client.get(path)
                    samples.append(time.perf_counter() - started)
                    assert response.status_code == 200
                times[name] = statistics.median(samples) * 1000
    finally:
        server.stop()
        store.close()
    return times


def _spread(samples: dict[str, list[float]]) -> str:
    return ", ".join(f"{mode} {min(values):.1f}-{max(values):.1f} s" for mode, values in samples.items())


def _met(ratio: float) -> str:
    return "yes" if ratio <= 1.05 else "no"


def table(cost: dict[str, Any], fill_s: float | None, times: dict[str, float], runs: int, tests: int) -> str:
    lines = [f"Measured {dt.date.today().isoformat()} on {os.cpu_count()} cores, {platform.system().lower()} with "
             "`python bench/store.py`.", "",
             "| figure | value | goal | met |", "| --- | --- | --- | --- |"]
    for w in cost["workloads"]:
        what = (f"{w['conversations']} {'persona ' if w['workload'] == 'persona' else ''}conversations (5 turns, "
                f"--parallel 100)")
        lines += [
            f"| {what}: the store's own CPU (bench/store_own.py, median of {w['rounds']}) over the run's CPU with "
            f"it off | {w['own_lite_s']:.3f} s of {w['cpu_off_s']:.2f} s: {1 + w['own_share']:.3f}x (through "
            f"SQLAlchemy, as before: {w['own_full_s']:.3f} s, {1 + w['own_full_s'] / w['cpu_off_s']:.3f}x) | "
            f"<= 1.05x | {_met(1 + w['own_share'])} |",
            f"| {what}, whole runs on vs off, median of {w['rounds']} pairs' ratios: CPU | {w['cpu_sqlite_s']:.2f} s "
            f"vs {w['cpu_off_s']:.2f} s: {w['cpu_ratio']:.3f}x | <= 1.05x | {_met(w['cpu_ratio'])} |",
            f"| the same, wall | {w['wall_sqlite_s']:.2f} s vs {w['wall_off_s']:.2f} s: {w['ratio']:.3f}x "
            f"(spread: {_spread(w['walls'])}) | <= 1.05x | {_met(w['ratio'])} |"]
    lines.append(f"| creating the store (once per project: `tamesu store migrate`, or the first run) | "
                 f"{cost['create_cpu_s']:.2f} s CPU | | |")
    for name, ms in times.items():
        lines.append(f"| `tamesu view` {name}, {runs:,} runs x {tests} tests | {ms:.0f} ms | < 300 ms | "
                     f"{'yes' if ms < 300 else 'no'} |")
    if fill_s is not None:
        lines.append(f"| filling that store in bulk (SQLite) | {fill_s:.0f} s | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-view", action="store_true", help="Only the store's cost on a run.")
    parser.add_argument("--no-persona", action="store_true", help="Only the scripted REST workload.")
    args = parser.parse_args()
    conversations, runs, tests = (200, 1000, 100) if args.quick else (1000, 10_000, 100)
    with tempfile.TemporaryDirectory(prefix="tamesu-bench-store-") as temporary:
        folder = Path(temporary)
        cost = store_cost(folder, conversations, 3 if args.quick else args.rounds, not args.no_persona)
        for w in cost["workloads"]:
            print(f"{w['workload']}: store's own CPU {w['own_lite_s']:.3f} s (SQLAlchemy {w['own_full_s']:.3f} s) of "
                  f"{w['cpu_off_s']:.2f} s; whole runs {w['cpu_ratio']:.3f}x CPU, {w['ratio']:.3f}x wall", flush=True)
        url = f"sqlite:///{folder / 'big.db'}"
        if args.skip_view:
            print(json.dumps(cost, indent=2))
            print(table(cost, None, {}, runs, tests))
            return
        fill_s = fill(url, runs, tests)
        print(f"filled {runs} runs x {tests} tests in {fill_s:.0f} s", flush=True)
        times = page_times(url, runs)
        for name, ms in times.items():
            print(f"  {name}: {ms:.0f} ms")
    text = table(cost, fill_s, times, runs, tests)
    print(text)
    if args.quick:
        return
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / f"{dt.date.today().isoformat()}-store.json").write_text(json.dumps(
        {"store_cost": cost, "fill_s": fill_s, "page_ms": times, "runs": runs, "tests": tests}, indent=2) + "\n")
    doc = DOC.read_text(encoding="utf-8")
    block = f"<!-- bench-store:start -->\n{text}\n<!-- bench-store:end -->"
    if "<!-- bench-store:start -->" in doc:
        doc = re.sub(r"<!-- bench-store:start -->.*?<!-- bench-store:end -->", lambda _: block, doc, flags=re.S)
    else:
        doc += "\n## The results store\n\n" + block + "\n"
    DOC.write_text(doc, encoding="utf-8")


if __name__ == "__main__":
    main()
