"""CPU of one `tamesu` command as the test suite's warm zygote runs it (tests/forked.py): the zygote's modules
imported once, `gc.freeze()`, then one `os.fork()` per run, whose CPU (user + system, from wait4) is what the
run itself costs once Python and its imports are paid for. This is what every `tamesu run` of the inner loop
costs, and what a user pays on top of start-up on every CI run.

    python bench/fork_cost.py [--runs 30] [--only test,run] [--profile DIR]

Prints the median and p90 CPU per command; `--profile DIR` also writes one cProfile (process time) per command,
summed over its runs, and prints its top functions. The expense example's agent runs in a process of its own.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import cProfile
import gc
import importlib
import os
import pstats
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "expense-agent"

_SUITE = """targets:
  bot: { type: rest, url: '{url}/chat', response: { text: $.text } }
tests:
  - name: policy
    target: bot
    scenario: { script: [ { say: What is the expense policy? } ] }
    assert: [ { contains: 'approval' } ]
"""

_AGENT = (
    "import importlib.util, sys, threading\n"
    "spec = importlib.util.spec_from_file_location('expense_agent', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec); sys.modules[spec.name] = module; spec.loader.exec_module(module)\n"
    "from tamesu.net.serve import ThreadServer\n"
    "server = ThreadServer(module.create_app()).start()\n"
    "print(server.url, flush=True)\n"
    "sys.stdin.read()\n"
    "server.stop()\n")


def _commands(url: str) -> dict[str, tuple[list[str], str]]:
    """Name: (arguments, what the run's folder starts as: 'example', 'suite' or 'empty')."""
    return {
        "test": (["test", "-i", "tests/multi-turn.jsonl", "-n", "expense", "--out", "runs"], "example"),
        "run": (["run", "suite.yaml", "--out", "out"], "suite"),
        "run-reports": (["run", "suite.yaml", "--out", "out", "--report", "html,junit,json"], "suite"),
        "validate": (["validate", "suite.yaml"], "suite"),
        "schema": (["schema", "suite"], "empty"),
        "init": (["init"], "empty"),
        "version": (["--version"], "empty"),
    }


def _prepare(kind: str, url: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tamesu-forkcost-"))
    if kind == "example":
        shutil.copytree(EXAMPLE, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("tamesu-runs", ".tamesu"))
    elif kind == "suite":
        (folder / "suite.yaml").write_text(_SUITE.replace("{url}", url))
    return folder


def _child(args: list[str], folder: Path, env: dict[str, str], profile: Path | None) -> None:
    """In the fork: what tests/forked.py's `_become_module` and `_finish` do."""
    code = 1
    try:
        out = os.open(folder / ".stdout", os.O_WRONLY | os.O_CREAT)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(env)
        sys.path[0] = str(folder)
        sys.argv = ["-m", *args]
        profiler = cProfile.Profile(time.process_time) if profile else None
        try:
            if profiler:
                profiler.enable()
            runpy.run_module("tamesu", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
            if profiler:
                profiler.disable()
                profiler.dump_stats(str(profile))
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)


def _one(args: list[str], kind: str, url: str, env: dict[str, str], profile: Path | None) -> tuple[float, int]:
    folder = _prepare(kind, url)
    try:
        pid = os.fork()
        if pid == 0:
            _child(args, folder, env, profile)
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.stderr.write((folder / ".stdout").read_text()[-3000:])
        return usage.ru_utime + usage.ru_stime, code
    finally:
        shutil.rmtree(folder)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", default="")
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--top", type=int, default=40)
    options = parser.parse_args()
    agent = subprocess.Popen([sys.executable, "-c", _AGENT, str(EXAMPLE / "agent.py")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        url = agent.stdout.readline().strip()
        sys.path.insert(0, str(ROOT / "tests"))
        forked = importlib.import_module("forked")
        for name in forked.WARM:
            importlib.import_module(name)
        gc.freeze()
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "EXPENSE_URL": url}
        for name in ("TAMESU_DEBUG", "TAMESU_STORE", "TAMESU_RUN_ID"):
            env.pop(name, None)
        commands = _commands(url)
        chosen = [name for name in commands if not options.only or name in options.only.split(",")]
        if options.profile:
            options.profile.mkdir(parents=True, exist_ok=True)
        cpu: dict[str, list[float]] = {name: [] for name in chosen}
        for index in range(options.runs):  # interleaved, so a busy minute spreads over every command
            for name in chosen:
                args, kind = commands[name]
                dump = options.profile / f"{name}.{index}.prof" if options.profile else None
                seconds, code = _one(args, kind, url, env, dump)
                if code != 0:  # every command here passes: another code means the figure is of something else
                    raise SystemExit(f"{name}: exit {code}")
                cpu[name].append(seconds)
        for name in chosen:
            values = sorted(cpu[name])
            p90 = values[int(0.9 * (len(values) - 1))]
            print(f"{name:12} median {statistics.median(values) * 1000:6.1f} ms  p90 {p90 * 1000:6.1f} ms  "
                  f"(n={len(values)})")
        if options.profile:
            for name in chosen:
                files = sorted(options.profile.glob(f"{name}.*.prof"))
                stats = pstats.Stats(*map(str, files))
                stats.dump_stats(str(options.profile / f"{name}.prof"))
                for file in files:
                    file.unlink()
                print(f"\n==== {name} ({len(files)} runs summed)")
                stats.sort_stats("cumulative").print_stats(options.top)
    finally:
        if agent.stdin is not None:
            agent.stdin.close()
        agent.wait(10)


if __name__ == "__main__":
    main()
