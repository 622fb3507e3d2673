"""The whole benchmark: `python bench/run.py` (or `make bench`). Writes bench/results/<date>.json and .md and
refreshes the table in docs/performance.md.

Every figure is a ratio against a baseline measured in the same run, or a count, never a bare time compared
with a fixed number: the machine is shared and noisy. CPU time is read per child process with wait4, so the
agents' own work is never counted as tamesu's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PYTHON = sys.executable
TAMESU = [PYTHON, "-m", "tamesu"]
_LISTENING = re.compile(r"listening on (http://\S+)")


@dataclass
class Measured:
    cpu_s: float
    wall_s: float
    peak_rss_mib: float
    returncode: int
    stdout: str


def measure(command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> Measured:
    """Run one command; its own CPU (user + system) and peak memory, from wait4."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return Measured(usage.ru_utime + usage.ru_stime, time.perf_counter() - started, usage.ru_maxrss / 1024,
                    process.returncode, output)


class Agent:
    """A benchmark server (bench/agents.py, or another script of bench/) in a process of its own."""

    script = "agents.py"

    def __init__(self) -> None:
        self.process = subprocess.Popen([PYTHON, str(BENCH / self.script)], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        match = _LISTENING.search(line)
        if not match:
            self.process.kill()
            raise SystemExit(f"bench/{self.script} did not start: {line!r}")
        self.url = match.group(1)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


class A2AShop:
    """The example A2A shop agent, answering at once (no delay between streamed words)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [PYTHON, str(ROOT / "examples" / "a2a-shop" / "agent.py"), "--port", "0", "--grpc-port", "0",
             "--word-delay", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        found: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while len(found) < 3 and time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            for key, pattern in (("jsonrpc", r"listening on (http://\S+)"), ("http", r"HTTP\+JSON\s+(http://\S+)"),
                                 ("grpc", r"gRPC\s+(grpc://\S+)")):
                if match := re.search(pattern, line):
                    found[key] = match.group(1)
        if len(found) < 3:
            self.process.kill()
            raise SystemExit(f"the A2A shop agent did not start: {found}")
        self.urls = found
        self.origin = re.sub(r"^(http://[^/]+).*$", r"\1", found["jsonrpc"])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class GrpcShop:
    """The example gRPC agent (tamesu's turn API), answering at once (no delay between streamed words)."""

    token = "bench-token"

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [PYTHON, str(ROOT / "examples" / "grpc-agent" / "agent.py"), "--port", "0", "--word-delay", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "GRPC_AGENT_TOKEN": self.token})
        assert self.process.stdout is not None
        match = re.search(r"listening on (grpc://\S+)", self.process.stdout.readline())
        if not match:
            self.process.kill()
            raise SystemExit("the gRPC example agent did not start")
        self.url = match.group(1)
        # it prints a line per turn: read them away, or a full pipe would stall it
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def grpc_per_turn(folder: Path, shop: GrpcShop, parallel: int, small: int, large: int, turns: int, *,
                  rounds: int = 3, out_root: Path | None = None) -> dict[str, Any]:
    """tamesu's grpc target (Converse stream) against a bare grpc.aio client of the turn API, CPU per turn: the
    slope between a small and a large run, `rounds` rounds with the sides alternating, the ratio the median of
    the rounds' own ratios (as `per_turn_overhead`)."""
    steps = ", ".join(f"{{ say: 'step {n + 1}' }}" for n in range(turns))
    suites: dict[int, Path] = {}
    for n in (small, large):
        tests = "".join(f"  - name: c{index}\n    target: shop\n    scenario: {{ max_turns: {turns}, "
                        f"script: [ {steps} ] }}\n" for index in range(n))
        suites[n] = folder / f"grpc-{n}x{turns}.yaml"
        suites[n].write_text(f"targets:\n  shop: {{ type: grpc, url: '{shop.url}', headers: {{ authorization: "
                             f"'Bearer {shop.token}' }} }}\ntests:\n" + tests, encoding="utf-8")

    def tamesu_cpu(n: int) -> float:
        measured, _ = run_tamesu(folder, suites[n], parallel, out_root)
        if measured.returncode != 0:
            raise SystemExit(f"grpc: tamesu exited {measured.returncode}:\n{measured.stdout[-2000:]}")
        return measured.cpu_s

    def baseline_cpu(n: int) -> float:
        baseline = measure([PYTHON, str(BENCH / "grpc_baseline_client.py"), shop.url, shop.token, str(n),
                            str(turns), str(parallel)])
        if baseline.returncode != 0:
            raise SystemExit(f"grpc: the baseline failed:\n{baseline.stdout[-2000:]}")
        return baseline.cpu_s

    sides = {"tamesu": tamesu_cpu, "baseline": baseline_cpu}
    slopes: dict[str, list[float]] = {side: [] for side in sides}
    for number in range(rounds):
        for side in list(sides) if number % 2 == 0 else list(sides)[::-1]:
            cpu = {n: sides[side](n) for n in (small, large)}
            slopes[side].append((cpu[large] - cpu[small]) / ((large - small) * turns) * 1000)
    ratios = [ours / theirs for ours, theirs in zip(slopes["tamesu"], slopes["baseline"], strict=True)]
    ratio = statistics.median(ratios)
    return {"variant": "grpc Converse stream", "at_once": parallel, "rounds": rounds,
            "tamesu_cpu_ms_per_turn": round(statistics.median(slopes["tamesu"]), 3),
            "baseline_cpu_ms_per_turn": round(statistics.median(slopes["baseline"]), 3),
            "ratio": round(ratio, 2), "round_ratios": [round(r, 2) for r in ratios],
            "run_folders": "tmpfs" if out_root is not None else "disk", "goal": "<= 1.3", "met": ratio <= 1.3}


A2A_VARIANTS = {  # name: (binding for the baseline, transport key, stream)
    "a2a JSON-RPC send": ("JSONRPC", "jsonrpc", False),
    "a2a JSON-RPC stream": ("JSONRPC", "jsonrpc", True),
    "a2a HTTP+JSON send": ("HTTP+JSON", "http", False),
    "a2a gRPC send": ("GRPC", "grpc", False),
}


def write_a2a_suite(folder: Path, shop: A2AShop, variant: str, conversations: int, turns: int) -> Path:
    _, transport, stream = A2A_VARIANTS[variant]
    url = shop.urls[transport]
    steps = ", ".join(f"{{ say: 'step {n + 1}' }}" for n in range(turns))
    target = (f"  shop: {{ type: a2a, url: '{url}', transport: {transport}"
              + (", stream: true" if stream else "") + " }\n")
    tests = "".join(
        f"  - name: c{index}\n    target: shop\n    scenario: {{ max_turns: {turns}, script: [ {steps} ] }}\n"
        for index in range(conversations))
    suite = folder / f"a2a-{transport}-{int(stream)}-{conversations}x{turns}.yaml"
    suite.write_text("targets:\n" + target + "tests:\n" + tests, encoding="utf-8")
    return suite


def a2a_per_turn(folder: Path, shop: A2AShop, variant: str, parallel: int, small: int, large: int,
                 turns: int) -> dict[str, Any]:
    binding, _, stream = A2A_VARIANTS[variant]
    tamesu_cpu: dict[int, float] = {}
    baseline_cpu: dict[int, float] = {}
    for n in (small, large):
        measured, _ = run_tamesu(folder, write_a2a_suite(folder, shop, variant, n, turns), parallel)
        if measured.returncode != 0:
            raise SystemExit(f"{variant}: tamesu exited {measured.returncode}:\n{measured.stdout[-2000:]}")
        tamesu_cpu[n] = measured.cpu_s
        baseline = measure([PYTHON, str(BENCH / "a2a_baseline_client.py"), shop.origin, binding,
                            "1" if stream else "0", str(n), str(turns), str(parallel)])
        if baseline.returncode != 0:
            raise SystemExit(f"{variant}: the baseline failed:\n{baseline.stdout[-2000:]}")
        baseline_cpu[n] = baseline.cpu_s
    extra = (large - small) * turns
    tamesu_ms = (tamesu_cpu[large] - tamesu_cpu[small]) / extra * 1000
    baseline_ms = (baseline_cpu[large] - baseline_cpu[small]) / extra * 1000
    return {"variant": variant, "at_once": parallel, "tamesu_cpu_ms_per_turn": round(tamesu_ms, 3),
            "baseline_cpu_ms_per_turn": round(baseline_ms, 3), "ratio": round(tamesu_ms / baseline_ms, 2),
            "goal": "<= 1.3", "met": tamesu_ms / baseline_ms <= 1.3}


def write_suite(folder: Path, url: str, conversations: int, turns: int, *, path: str = "/chat",
                streaming: bool = False) -> Path:
    steps = ", ".join(f"{{ say: 'step {n + 1}' }}" for n in range(turns))
    target = f"  bot: {{ type: rest, url: '{url}{path}'" + (", streaming: sse, response: { delta: $.delta }" if
                                                               streaming else "") + " }\n"
    tests = "".join(
        f"  - name: c{index}\n    target: bot\n    scenario: {{ max_turns: {turns}, script: [ {steps} ] }}\n"
        f"    assert: [ {{ contains: {'first' if streaming else 'echo'} }} ]\n"
        for index in range(conversations))
    suite = folder / f"bench-{conversations}x{turns}{'-sse' if streaming else ''}.yaml"
    suite.write_text("targets:\n" + target + "tests:\n" + tests, encoding="utf-8")
    return suite


def tmpfs_root() -> Path | None:
    """A folder on tmpfs for tamesu's run folders, when the machine has one (see docs/performance.md, "Where the
    run folders go"); None: the benchmark's temporary folder."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        return None
    return Path(tempfile.mkdtemp(prefix="tamesu-bench-", dir=shm))


def run_tamesu(folder: Path, suite: Path, parallel: int,
               out_root: Path | None = None) -> tuple[Measured, list[dict[str, Any]]]:
    """One `tamesu run`, its run folder below `out_root` (removed once read: tmpfs is memory) or `folder`."""
    out = (out_root or folder) / f"out-{suite.stem}-{parallel}-{time.monotonic_ns()}"
    measured = measure([*TAMESU, "run", str(suite), "--parallel", str(parallel), "--out", str(out),
                        "--color", "never"], cwd=folder)
    results: list[dict[str, Any]] = []
    for found in out.glob("*/results.jsonl"):
        results = [json.loads(line) for line in found.read_text().splitlines()]
    if out_root is not None:
        shutil.rmtree(out, ignore_errors=True)
    return measured, results


def run_baseline(url: str, conversations: int, turns: int, parallel: int, transport: str = "httpx") -> Measured:
    """The bare loop (`bench/baseline_client.py`) on httpx's transport, on tamesu's (`transport="tamesu"`), or a
    bare aiohttp loop (`transport="aiohttp"`, the floor of issue 28's goal)."""
    return measure([PYTHON, str(BENCH / "baseline_client.py"), f"{url}/chat", str(conversations), str(turns),
                    str(parallel), transport])


def per_turn_overhead(folder: Path, url: str, parallel: int, small: int, large: int, turns: int, *,
                      rounds: int = 5, out_root: Path | None = None) -> dict[str, Any]:
    """CPU per turn from the slope between a small and a large run, so start-up cancels out; `rounds` rounds,
    the sides in an order that alternates, and the ratio is the median of each round's own ratio (the
    machine's speed drifts by a third between minutes; two runs side by side drift together). With
    `out_root` (tmpfs) the run folders go there, and tamesu runs once more per round with them on the disk.
    The goal's baseline is the loop on httpx's transport; the loop runs once more on tamesu's own transport, so
    what the engine adds over the same wire code stays in the table (`same_transport_ratio`), and once as a bare
    aiohttp loop, issue 28's floor (`aiohttp_ratio`: at most 1.5x)."""
    suites = {n: write_suite(folder, url, n, turns) for n in (small, large)}
    sides = ["tamesu", "baseline", "baseline on tamesu's transport", "baseline on aiohttp"] + (
        ["tamesu on the disk"] if out_root is not None else [])
    slopes: dict[str, list[float]] = {side: [] for side in sides}
    for number in range(rounds):
        for side in sides if number % 2 == 0 else sides[::-1]:
            if side.startswith("baseline"):
                transport = "tamesu" if side.endswith("transport") else "aiohttp" if side.endswith("aiohttp") \
                    else "httpx"
                cpu = {n: run_baseline(url, n, turns, parallel, transport).cpu_s for n in (small, large)}
            else:
                root = out_root if side == "tamesu" else None
                cpu = {n: run_tamesu(folder, suites[n], parallel, root)[0].cpu_s for n in (small, large)}
            slopes[side].append((cpu[large] - cpu[small]) / ((large - small) * turns) * 1000)
    ratios = [ours / theirs for ours, theirs in zip(slopes["tamesu"], slopes["baseline"], strict=True)]
    ratio = statistics.median(ratios)
    row = {"at_once": parallel, "rounds": rounds,
           "tamesu_cpu_ms_per_turn": round(statistics.median(slopes["tamesu"]), 3),
           "baseline_cpu_ms_per_turn": round(statistics.median(slopes["baseline"]), 3),
           "ratio": round(ratio, 2), "round_ratios": [round(r, 2) for r in ratios],
           "run_folders": "tmpfs" if out_root is not None else "disk", "goal": "<= 1.3", "met": ratio <= 1.3}
    same = [ours / theirs for ours, theirs in zip(slopes["tamesu"], slopes["baseline on tamesu's transport"],
                                                  strict=True)]
    row["same_transport_ratio"] = round(statistics.median(same), 2)
    row["same_transport_baseline_cpu_ms_per_turn"] = round(statistics.median(slopes["baseline on tamesu's transport"]),
                                                           3)
    floor = [ours / theirs for ours, theirs in zip(slopes["tamesu"], slopes["baseline on aiohttp"], strict=True)]
    row["aiohttp_ratio"] = round(statistics.median(floor), 2)
    row["aiohttp_cpu_ms_per_turn"] = round(statistics.median(slopes["baseline on aiohttp"]), 3)
    row["aiohttp_met"] = row["aiohttp_ratio"] <= 1.5
    if out_root is not None:
        on_disk = [ours / theirs for ours, theirs in zip(slopes["tamesu on the disk"], slopes["baseline"],
                                                         strict=True)]
        row["disk_ratio"] = round(statistics.median(on_disk), 2)
        row["disk_cpu_ms_per_turn"] = round(statistics.median(slopes["tamesu on the disk"]), 3)
    return row


def concurrency(folder: Path, url: str, at_once: int, turns: int) -> dict[str, Any]:
    suite = write_suite(folder, url, at_once, turns)
    measured, results = run_tamesu(folder, suite, at_once)
    passed = sum(1 for r in results if r["status"] == "passed")
    baseline = run_baseline(url, at_once, turns, at_once)
    return {"at_once": at_once, "turns": at_once * turns,
            "turns_per_s": round(at_once * turns / measured.wall_s, 1),
            "baseline_turns_per_s": round(at_once * turns / baseline.wall_s, 1),
            "peak_rss_mib": round(measured.peak_rss_mib, 1), "finished": len(results), "passed": passed,
            "lost": at_once - len(results), "exit_code": measured.returncode}


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 3),
            "p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 3), "n": len(ordered)}


def accuracy(folder: Path, url: str, tests: int, turns: int) -> dict[str, Any]:
    """One conversation at a time (the accuracy of a timestamp, not contention), against a plain client's own
    error on the same agent in the same run."""
    from agents import FIRST_MS, LAST_MS  # the known delays of the timed agent

    suite = write_suite(folder, url, tests, turns, path="/sse", streaming=True)
    out = folder / f"accuracy-{time.monotonic_ns()}"
    measure([*TAMESU, "run", str(suite), "--out", str(out), "--color", "never"], cwd=folder)
    ttft_errors: list[float] = []
    latency_errors: list[float] = []
    for result in out.rglob("result.json"):
        for turn in json.loads(result.read_text())["turns"]:
            agent = turn["agent"]
            ttft_errors.append(agent["first_token_at_ms"] - agent["sent_at_ms"] - FIRST_MS)
            latency_errors.append(agent["completed_at_ms"] - agent["sent_at_ms"] - LAST_MS)
    plain = json.loads(measure([PYTHON, str(BENCH / "timing_baseline.py"), f"{url}/sse", str(tests)]).stdout)
    ttft, latency = _quantiles(ttft_errors), _quantiles(latency_errors)
    worst = max(abs(ttft["p95"]), abs(latency["p95"]))
    return {"time_to_first_token_ms_error": ttft, "turn_latency_ms_error": latency,
            "baseline_time_to_first_token_ms_error": _quantiles([p[0] for p in plain]),
            "baseline_turn_latency_ms_error": _quantiles([p[1] for p in plain]),
            "goal": "p95 <= 2 ms", "met": worst <= 2.0, "known_first_ms": FIRST_MS, "known_last_ms": LAST_MS}


def startup(folder: Path, repeats: int) -> dict[str, Any]:
    suite = write_suite(folder, "http://127.0.0.1:9", 200, 3)
    entry = str(Path(PYTHON).parent / "tamesu")

    def median_wall(command: list[str]) -> float:
        return statistics.median(measure(command, cwd=folder).wall_s for _ in range(repeats))

    baseline = median_wall([PYTHON, "-c", "pass"])
    version = median_wall([entry, "--version"])
    validate = median_wall([entry, "validate", str(suite)])
    listed = median_wall([entry, "list", str(suite)])
    return {"python_c_pass_s": round(baseline, 3), "version_s": round(version, 3),
            "version_minus_baseline_s": round(version - baseline, 3), "validate_200_s": round(validate, 3),
            "list_200_s": round(listed, 3),
            "goals": {"version within 0.25 s of python -c pass": version - baseline <= 0.25,
                      "validate of 200 tests under 1 s": validate < 1.0}}


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Measured {result['date']} on {result['machine']} with `{result['command']}`.", "",
             "| figure | tamesu | baseline | ratio / value | goal | met |", "| --- | --- | --- | --- | --- | --- |"]
    for row in result.get("a2a_per_turn", []):
        lines.append(f"| CPU per turn, {row['variant']}, {row['at_once']} at once | {row['tamesu_cpu_ms_per_turn']} ms"
                     f" | {row['baseline_cpu_ms_per_turn']} ms (a2a-sdk client) | {row['ratio']}x | {row['goal']} | "
                     f"{'yes' if row['met'] else 'no'} |")
    for row in result.get("grpc_per_turn", []):
        lines.append(f"| CPU per turn, {row['variant']}, {row['at_once']} at once | {row['tamesu_cpu_ms_per_turn']} ms"
                     f" | {row['baseline_cpu_ms_per_turn']} ms (bare grpc.aio client) | {row['ratio']}x (median of "
                     f"{row.get('rounds', 1)} rounds) | {row['goal']} | {'yes' if row['met'] else 'no'} |")
    for row in result["per_turn"]:
        where = f", run folders on {row['run_folders']}" if "run_folders" in row else ""
        lines.append(f"| CPU per turn, rest, {row['at_once']} at once{where} | {row['tamesu_cpu_ms_per_turn']} ms | "
                     f"{row['baseline_cpu_ms_per_turn']} ms (httpx loop) | {row['ratio']}x (median of "
                     f"{row.get('rounds', 1)} rounds) | {row['goal']} | {'yes' if row['met'] else 'no'} |")
        if "disk_ratio" in row:
            lines.append(f"| CPU per turn, rest, {row['at_once']} at once, run folders on the disk | "
                         f"{row['disk_cpu_ms_per_turn']} ms | {row['baseline_cpu_ms_per_turn']} ms (httpx loop) | "
                         f"{row['disk_ratio']}x | | |")
        if "same_transport_ratio" in row:
            lines.append(f"| CPU per turn, rest, {row['at_once']} at once, against the loop on tamesu's transport | "
                         f"{row['tamesu_cpu_ms_per_turn']} ms | {row['same_transport_baseline_cpu_ms_per_turn']} ms "
                         f"(httpx client, tamesu's transport) | {row['same_transport_ratio']}x | | |")
        if "aiohttp_ratio" in row:
            lines.append(f"| CPU per turn, rest, {row['at_once']} at once, against a bare aiohttp loop | "
                         f"{row['tamesu_cpu_ms_per_turn']} ms | {row['aiohttp_cpu_ms_per_turn']} ms (aiohttp loop) | "
                         f"{row['aiohttp_ratio']}x | <= 1.5 | {'yes' if row['aiohttp_met'] else 'no'} |")
    for row in result["concurrency"]:
        ok = row["lost"] == 0 and row["passed"] == row["finished"]
        memory_ok = row["peak_rss_mib"] < 1024
        lines.append(f"| {row['at_once']} conversations at once ({row['turns']} turns) | {row['turns_per_s']} turns/s,"
                     f" {row['peak_rss_mib']} MiB peak | {row['baseline_turns_per_s']} turns/s | lost {row['lost']}, "
                     f"failed {row['finished'] - row['passed']} | nothing lost, < 1 GiB | "
                     f"{'yes' if ok and memory_ok else 'no'} |")
    acc = result["accuracy"]
    for metric, known in (("time_to_first_token_ms", acc["known_first_ms"]), ("turn_latency_ms", acc["known_last_ms"])):
        ours, plain = acc[f"{metric}_error"], acc[f"baseline_{metric}_error"]
        lines.append(f"| {metric} error against a known {known} ms (n={ours['n']}) | p50 {ours['p50']} ms, p95 "
                     f"{ours['p95']} ms | plain httpx: p50 {plain['p50']} ms, p95 {plain['p95']} ms | "
                     f"{round(ours['p95'] - plain['p95'], 3):+} ms at p95 | p95 <= 2 ms | "
                     f"{'yes' if abs(ours['p95']) <= 2 else 'no'} |")
    if result.get("persona"):
        from persona import markdown_rows

        lines.extend(markdown_rows(result["persona"]))
    start = result["startup"]
    lines.append(f"| `tamesu --version` | {start['version_s']} s | {start['python_c_pass_s']} s (`python -c pass`) | "
                 f"+{start['version_minus_baseline_s']} s | within 0.25 s | "
                 f"{'yes' if start['goals']['version within 0.25 s of python -c pass'] else 'no'} |")
    lines.append(f"| `tamesu validate`, 200 tests | {start['validate_200_s']} s | | | under 1 s | "
                 f"{'yes' if start['goals']['validate of 200 tests under 1 s'] else 'no'} |")
    lines.append(f"| `tamesu list`, 200 tests | {start['list_200_s']} s | | | | |")
    return "\n".join(lines) + "\n"


def refresh_docs(table: str) -> None:
    doc = ROOT / "docs" / "performance.md"
    text = doc.read_text(encoding="utf-8")
    start, end = "<!-- bench:start -->", "<!-- bench:end -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        doc.write_text(f"{head}{start}\n{table}{end}{tail}", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run (not for the table)")
    args = parser.parse_args()
    sizes = {"small": 4, "large": 40 if args.quick else 400, "turns": 5,
             "levels": [1, 10, 100] if args.quick else [1, 10, 100, 1000], "accuracy_tests": 8 if args.quick else 40,
             "repeats": 3 if args.quick else 7, "rounds": 1 if args.quick else 5}
    out_root = tmpfs_root()
    agent = Agent()
    shop = A2AShop()
    grpc_shop = GrpcShop()
    from persona import ModelServer, persona_figures

    model = ModelServer()
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-bench-") as temporary:
            folder = Path(temporary)
            result = {
                "date": dt.date.today().isoformat(), "machine": f"{os.cpu_count()} cores, {sys.platform}",
                "command": "python bench/run.py" + (" --quick" if args.quick else ""),
                "a2a_per_turn": [a2a_per_turn(folder, shop, variant, 1, 2, 6 if args.quick else 40, sizes["turns"])
                                 for variant in A2A_VARIANTS]
                + [a2a_per_turn(folder, shop, "a2a JSON-RPC send", 100, 20, 40 if args.quick else 200,
                                sizes["turns"])],
                "grpc_per_turn": [grpc_per_turn(folder, grpc_shop, 1, 2, 6 if args.quick else 100, sizes["turns"],
                                                rounds=1 if args.quick else 3, out_root=out_root)],
                "per_turn": [per_turn_overhead(folder, agent.url, 1, sizes["small"], sizes["large"] // 4,
                                               sizes["turns"], rounds=sizes["rounds"], out_root=out_root),
                             per_turn_overhead(folder, agent.url, 100, sizes["small"] * 5, sizes["large"],
                                               sizes["turns"], rounds=sizes["rounds"], out_root=out_root)],
                "concurrency": [concurrency(folder, agent.url, n, sizes["turns"]) for n in sizes["levels"]],
                "accuracy": accuracy(folder, agent.url, sizes["accuracy_tests"], 3),
                "startup": startup(folder, sizes["repeats"]),
                "persona": persona_figures(folder, model, agent, args.quick, out_root=out_root),
            }
    finally:
        agent.stop()
        shop.stop()
        grpc_shop.stop()
        model.stop()
        if out_root is not None:
            shutil.rmtree(out_root, ignore_errors=True)
    table = markdown(result)
    print(table)
    if not args.quick:
        out = BENCH / "results" / f"{result['date']}.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        out.with_suffix(".md").write_text(table, encoding="utf-8")
        refresh_docs(table)
    return 0


if __name__ == "__main__":
    from _owned import own_children

    own_children()
    sys.path.insert(0, str(BENCH))
    sys.exit(main())
