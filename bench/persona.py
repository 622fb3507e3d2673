"""The persona workload: N conversations x M simulated-user turns, each turn one model call and one agent
call, run by tamesu and by a bare asyncio+httpx loop (`persona_baseline.py`) against the same local servers.

    python bench/persona.py [--quick] [--shape openai|anthropic]   prints the figures (bench/run.py uses it too)

CPU per turn and wall time are slopes between two conversation counts at the same concurrency, so each side's
start-up cancels out; peak memory is the run with as many conversations as run at once.
Every run is checked: each conversation has its results line with exactly M agent turns, and the servers
served exactly N x M model calls and N x M agent calls.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import PYTHON, TAMESU, Agent, measure  # noqa: E402  (bench/ is a folder of scripts, not a package)


class ModelServer(Agent):
    script = "model_server.py"


def served(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/count", timeout=5) as answer:
        return json.loads(answer.read())


def write_suite(folder: Path, model_url: str, agent_url: str, shape: str, conversations: int, turns: int) -> Path:
    base_url = f"{model_url}/v1" if shape == "openai" else model_url
    tests = "".join(
        f"  - name: c{index}\n    target: bot\n    persona: {{ name: Ada, style: brief }}\n"
        f"    scenario: {{ goal: 'Find out where the order is', max_turns: {turns} }}\n"
        for index in range(conversations))
    suite = folder / f"persona-{shape}-{conversations}x{turns}.yaml"
    suite.write_text(
        f"models:\n  simulator: {{ provider: {shape}, model: bench, base_url: '{base_url}', api_key: bench-key }}\n"
        f"targets:\n  bot: {{ type: rest, url: '{agent_url}/chat' }}\ntests:\n{tests}", encoding="utf-8")
    return suite


def _why_not_passed(out: Path) -> str:
    """The most common reasons the run's tests did not pass (the run folder goes with the temporary one)."""
    reasons: dict[str, int] = {}
    for found in out.glob("*/*/*/run-*/result.json"):
        result = json.loads(found.read_text())
        if result.get("status") != "passed":
            failed = "; ".join(a.get("reason", "") for a in result.get("assertions", []) if not a.get("passed"))
            reason = f"{result.get('status')}: {result.get('error') or failed}"[:300]
            reasons[reason] = reasons.get(reason, 0) + 1
    common = sorted(reasons.items(), key=lambda item: -item[1])[:5]
    return "\n".join(f"{count} x {reason}" for reason, count in common) or "(no result.json says why)"


def run_side(folder: Path, side: str, model: ModelServer, agent: Agent, shape: str, conversations: int,
             turns: int, parallel: int) -> dict[str, Any]:
    """One run of tamesu or of the baseline, with its CPU, wall time, memory and the checks."""
    before_model, before_agent = served(model.url)[shape], served(agent.url)["chat"]
    if side == "tamesu":
        out = folder / f"out-{shape}-{conversations}-{parallel}-{time.monotonic_ns()}"
        suite = write_suite(folder, model.url, agent.url, shape, conversations, turns)
        measured = measure([*TAMESU, "run", str(suite), "--parallel", str(parallel), "--out", str(out),
                            "--color", "never", "--no-cache"], cwd=folder)
        lines = [json.loads(line) for found in out.glob("*/results.jsonl") for line in found.read_text().splitlines()]
        complete = sum(1 for line in lines if line.get("status") == "passed" and _turns(line) == turns)
        if measured.returncode != 0:
            raise SystemExit(f"persona {shape}: tamesu exited {measured.returncode}:\n{measured.stdout[-2000:]}\n"
                             f"{_why_not_passed(out)}")
    else:
        measured = measure([PYTHON, str(BENCH / "persona_baseline.py"), model.url, f"{agent.url}/chat", shape,
                            str(conversations), str(turns), str(parallel)])
        worked = int(measured.stdout.strip().splitlines()[-1]) if measured.returncode == 0 else 0
        complete = conversations if worked == conversations * turns else 0
    model_calls = served(model.url)[shape] - before_model
    agent_calls = served(agent.url)["chat"] - before_agent
    exact = model_calls == agent_calls == conversations * turns and complete == conversations
    return {"cpu_s": measured.cpu_s, "wall_s": measured.wall_s, "peak_rss_mib": measured.peak_rss_mib,
            "complete": complete, "model_calls": model_calls, "agent_calls": agent_calls, "exact": exact}


def _turns(line: dict[str, Any]) -> int:
    runs = line.get("runs") or [line]
    return max((int(run.get("metrics", {}).get("turns", 0)) for run in runs), default=0)


def per_turn(folder: Path, model: ModelServer, agent: Agent, shape: str, parallel: int, small: int, large: int,
             turns: int) -> dict[str, Any]:
    sides: dict[str, dict[int, dict[str, Any]]] = {"tamesu": {}, "baseline": {}}
    for count in (small, large):
        for side in sides:
            sides[side][count] = run_side(folder, side, model, agent, shape, count, turns, min(parallel, count))
    extra = (large - small) * turns
    ours = (sides["tamesu"][large]["cpu_s"] - sides["tamesu"][small]["cpu_s"]) / extra * 1000
    theirs = (sides["baseline"][large]["cpu_s"] - sides["baseline"][small]["cpu_s"]) / extra * 1000
    # wall time as a slope too: the difference between the two sizes, so each side's start-up cancels out
    our_wall = sides["tamesu"][large]["wall_s"] - sides["tamesu"][small]["wall_s"]
    their_wall = sides["baseline"][large]["wall_s"] - sides["baseline"][small]["wall_s"]
    at_once = sides["tamesu"][small] if small == parallel else sides["tamesu"][large]
    baseline_at_once = sides["baseline"][small] if small == parallel else sides["baseline"][large]
    return {"shape": shape, "at_once": parallel, "turns": turns, "sizes": [small, large],
            "tamesu_cpu_ms_per_turn": round(ours, 3), "baseline_cpu_ms_per_turn": round(theirs, 3),
            "ratio": round(ours / theirs, 2),
            # a wall slope at or below zero is the noise of a machine busier in one run than the other: no figure
            "wall_ratio": round(our_wall / their_wall, 2) if our_wall > 0 and their_wall > 0 else None,
            "peak_rss_mib": round(at_once["peak_rss_mib"], 1),
            "baseline_peak_rss_mib": round(baseline_at_once["peak_rss_mib"], 1),
            "exact": all(run["exact"] for side in sides.values() for run in side.values()),
            "lost": max(0, parallel - at_once["complete"])}


def persona_figures(folder: Path, model: ModelServer, agent: Agent, quick: bool,
                    shapes: tuple[str, ...] = ("openai", "anthropic")) -> list[dict[str, Any]]:
    turns = 5
    plans = [(1, 2, 6 if quick else 20), (100, 100, 200 if quick else 300)]
    if not quick:
        plans.append((1000, 1000, 2000))
    rows = [per_turn(folder, model, agent, "openai", *plan, turns) for plan in plans]
    if "anthropic" in shapes:
        rows.append(per_turn(folder, model, agent, "anthropic", 100, 100, 200 if quick else 300, turns))
    return rows


def goals(row: dict[str, Any]) -> dict[str, bool]:
    memory_cap = 100 if row["at_once"] <= 100 else 300
    wall = row["wall_ratio"]
    return {"cpu": row["ratio"] <= 1.3, "wall": wall is not None and wall <= 1.3,
            "memory": row["peak_rss_mib"] < memory_cap,
            "exact": row["exact"] and row["lost"] == 0}


def _times(ratio: float | None) -> str:
    return "no figure (noise)" if ratio is None else f"{ratio}x"


def markdown_rows(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for row in rows:
        met = goals(row)
        cap = 100 if row["at_once"] <= 100 else 300
        lines.append(
            f"| persona ({row['shape']}), CPU per turn, {row['at_once']} at once | {row['tamesu_cpu_ms_per_turn']} ms "
            f"| {row['baseline_cpu_ms_per_turn']} ms (httpx loop) | {row['ratio']}x | <= 1.3 | "
            f"{'yes' if met['cpu'] else 'no'} |")
        lines.append(
            f"| persona ({row['shape']}), {row['at_once']} at once: wall, memory, calls | "
            f"wall {_times(row['wall_ratio'])}, "
            f"{row['peak_rss_mib']} MiB peak | {row['baseline_peak_rss_mib']} MiB | lost {row['lost']}, exact calls "
            f"{'yes' if row['exact'] else 'no'} | wall <= 1.3x, < {cap} MiB, nothing lost | "
            f"{'yes' if met['wall'] and met['memory'] and met['exact'] else 'no'} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shape", choices=["openai", "anthropic", "both"], default="both")
    args = parser.parse_args()
    model, agent = ModelServer(), Agent()
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-persona-") as temporary:
            shapes = ("openai", "anthropic") if args.shape == "both" else (args.shape,)
            rows = persona_figures(Path(temporary), model, agent, args.quick, shapes)
    finally:
        model.stop()
        agent.stop()
    print("\n".join(markdown_rows(rows)))
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
