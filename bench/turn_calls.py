"""Python calls per turn, counted, not timed: what a scripted REST turn and a persona turn cost tamesu, by package.

    python bench/turn_calls.py [--workload rest|persona|both] [--shape openai|anthropic] [--small 100]
                               [--large 300] [--at-once 100] [--top 25] [--json FILE] [--keep DIR] [--floor]

Each workload (`bench/run.py`'s scripted REST suite, `bench/persona.py`'s persona suite, its simulated user's model
OpenAI-shaped or, `--shape anthropic`, Anthropic-shaped; 5 turns a conversation, run folders on tmpfs) runs twice
under cProfile (`tamesu run` in a process of its own, the servers in theirs), at `--small` and `--large`
conversations; the difference of the two profiles' call counts divided by the extra turns is one turn's own work,
start-up and the run's end cancelled out. A call count does not move with the
machine's load, so two commits can be compared on a shared machine where their timings cannot (issue 28's seventh
pass). What still moves a little: how many reads a socket's bytes take and how often the loop wakes at 100 at once.

Every thread is counted (the results store writes from one of its own). Calls are put in the package of the function
called, except builtins (`isinstance`, `len`, dict methods, C
functions of pydantic-core and json), which are charged to the package of their caller; `--top` lists the
functions of tamesu (with the builtins they call) that make the most calls per turn, and the calls tamesu makes
into other packages. `--floor` counts the bare aiohttp loop's turn too (`bench/baseline_client.py` and
`persona_baseline.py` with `aiohttp`, issue 28's floor), the same way.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from persona import ModelServer  # noqa: E402  (bench/ is a folder of scripts, not a package)
from persona import write_suite as persona_suite  # noqa: E402
from run import PYTHON, Agent, tmpfs_root  # noqa: E402
from run import write_suite as rest_suite  # noqa: E402

TURNS = 5
KEEP: Path | None = None
"""`--keep`: the folder the profiles are copied to (for pstats or snakeviz), else they go with the run."""
SDK_GROUP = "openai/httpx"
"""The report's name for the model SDK and httpx2 beneath it: `anthropic/httpx` with `--shape anthropic`."""
_STDLIB = sysconfig.get_paths()["stdlib"]
_PACKAGES = ("tamesu", "aiohttp", "multidict", "yarl", "openai", "anthropic", "httpx2", "httpx", "httpcore", "anyio",
             "pydantic", "pydantic_core", "ruamel", "yaml", "sqlalchemy", "jinja2", "markupsafe", "rich",
             "opentelemetry", "typing_extensions", "distro", "sniffio", "certifi", "truststore", "propcache",
             "aiohappyeyeballs", "frozenlist", "aiosignal")


def _child(profile_out: str, warm: list[str], argv: list[str]) -> None:
    """In the profiled process: `tamesu <argv>` (or, `argv` starting with a script's path, that script) under
    cProfile, the profile written to `profile_out`, the modules `warm` imported before it starts."""
    import importlib
    import runpy

    from tamesu.cli.main import entry

    # what the run would import as it goes (the plan, the runner, the model SDK at its first call): a module's
    # import is the same at both sizes, so it cancels out of a turn's count, but under cProfile it was most of
    # each run (anthropic's some 4,000 modules: 15 of a 10-conversation run's 25 s, 3x its unprofiled time)
    for name in warm:
        importlib.import_module(name)

    script = argv[0] if argv and argv[0].endswith(".py") else None
    sys.argv = [script, *argv[1:]] if script else ["tamesu", *argv]
    threads: list[cProfile.Profile] = []

    def in_thread(*_: object) -> None:
        # a cProfile profiler sees its own thread only: each thread started from now on (the results store's
        # writer, file syncs, to_thread work) gets one of its own, merged below
        sys.setprofile(None)
        profiler = cProfile.Profile()
        threads.append(profiler)
        profiler.enable()

    profiler = cProfile.Profile()
    code = 0
    threading.setprofile(in_thread)  # type: ignore[arg-type]
    profiler.enable()
    try:
        runpy.run_path(script, run_name="__main__") if script else entry()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        profiler.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        merged = pstats.Stats(profiler)
        for other in threads:
            other.create_stats()
            merged.add(other)
        merged.dump_stats(profile_out)
    raise SystemExit(code)


def package(filename: str) -> str:
    if filename == "~" or filename.startswith("<"):
        return "builtins"
    if "/tamesu/" in filename and "site-packages" not in filename:
        return "tamesu"
    if "site-packages/" in filename:
        top = filename.split("site-packages/", 1)[1].split("/", 1)[0]
        for name in _PACKAGES:
            if top == name or top.startswith(name + "."):
                return name
        return top.removesuffix(".py")
    if filename.startswith(_STDLIB):
        rest = filename[len(_STDLIB):].lstrip("/")
        return "asyncio" if rest.startswith("asyncio/") else "stdlib"
    return "other"


def _group(name: str) -> str:
    """The packages of the report's table."""
    if name in ("openai", "anthropic", "httpx", "httpx2", "httpcore", "anyio", "sniffio", "distro"):
        return SDK_GROUP
    return {"multidict": "aiohttp", "yarl": "aiohttp", "propcache": "aiohttp", "aiohappyeyeballs": "aiohttp",
            "frozenlist": "aiohttp", "aiosignal": "aiohttp", "pydantic_core": "pydantic",
            "typing_extensions": "stdlib"}.get(name, name)


def _where(filename: str, line: int, name: str) -> str:
    if "/tamesu/" in filename and "site-packages" not in filename:
        return f"{filename.split('/tamesu/', 1)[1]}:{line}({name})"
    if filename == "~":
        return name
    return f"{package(filename)}:{Path(filename).name}:{line}({name})"


def counts(profile: Path) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Calls by package (builtins charged to their caller's package), calls by tamesu function (its own calls
    plus the builtins it calls), and the calls tamesu's functions make into other packages, by edge."""
    stats: dict[Any, Any] = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    by_package: dict[str, int] = {}
    by_function: dict[str, int] = {}
    out_of_tamesu: dict[str, int] = {}
    for (filename, line, name), (_, calls, _, _, callers) in stats.items():
        owner = package(filename)
        if owner != "tamesu":
            for (caller_file, caller_line, caller_name), caller_calls in callers.items():
                if package(caller_file) == "tamesu":
                    made = caller_calls[1] if isinstance(caller_calls, tuple) else caller_calls
                    key = f"{_where(filename, line, name)} <- {_where(caller_file, caller_line, caller_name)}"
                    out_of_tamesu[key] = out_of_tamesu.get(key, 0) + made
        if owner != "builtins":
            group = _group(owner)
            by_package[group] = by_package.get(group, 0) + calls
            if owner == "tamesu":
                key = f"{filename.split('/tamesu/', 1)[1]}:{line}({name})"
                by_function[key] = by_function.get(key, 0) + calls
            continue
        for (caller_file, caller_line, caller_name), caller_calls in callers.items():
            made = caller_calls[1] if isinstance(caller_calls, tuple) else caller_calls
            group = _group(package(caller_file))
            label = f"builtins from {group}"
            by_package[label] = by_package.get(label, 0) + made
            if group == "tamesu":
                key = f"{caller_file.split('/tamesu/', 1)[1]}:{caller_line}({caller_name})"
                by_function[key] = by_function.get(key, 0) + made
    return by_package, by_function, out_of_tamesu


_WARM = ("tamesu.plan", "tamesu.engine.runner", "tamesu.report.console", "tamesu.store.writer")
"""What every profiled `tamesu run` imports before it starts (the model SDK of a persona run besides)."""


def profile_run(folder: Path, out_root: Path, suite: Path, parallel: int, extra: list[str],
                floor: list[str] | None = None, extra_warm: tuple[str, ...] = ()) -> Path:
    """One profiled `tamesu run` of `suite`; with `floor`, the aiohttp loop's script and arguments instead."""
    out = out_root / f"out-{suite.stem}"
    profile = folder / f"{suite.stem}{'-floor' if floor else ''}.prof"
    warm = [] if floor else list(_WARM) + list(extra_warm)
    command = [PYTHON, str(Path(__file__).resolve()), "--child", str(profile), ",".join(warm), "--",
               *(floor or ["run", str(suite), "--parallel", str(parallel), "--out", str(out), "--color", "never",
                           *extra])]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=1800)
    shutil.rmtree(out, ignore_errors=True)
    if KEEP is not None:
        KEEP.mkdir(parents=True, exist_ok=True)
        shutil.copy(profile, KEEP / profile.name)
    if done.returncode != 0:
        raise SystemExit(f"tamesu run {suite.name} exited {done.returncode}:\n{done.stdout[-2000:]}"
                         f"{done.stderr[-2000:]}")
    return profile


def per_turn(folder: Path, out_root: Path, workload: str, small: int, large: int, at_once: int,
             floor: bool = False, shape: str = "openai") -> tuple[dict[str, float], ...]:
    """The calls of one turn of `workload`: tamesu's, or (`floor`) the bare aiohttp loop's sending the same."""
    agent = Agent()
    model = ModelServer() if workload == "persona" else None
    try:
        profiles = {}
        for size in (small, large):
            parallel = min(at_once, size)
            if model is not None:
                suite = persona_suite(folder, model.url, agent.url, shape, size, TURNS)
                extra = ["--no-cache"]
                script = [str(BENCH / "persona_baseline.py"), model.url, f"{agent.url}/chat", shape, str(size),
                          str(TURNS), str(parallel), "aiohttp"]
            else:
                suite = rest_suite(folder, agent.url, size, TURNS)
                extra = []
                script = [str(BENCH / "baseline_client.py"), f"{agent.url}/chat", str(size), str(TURNS),
                          str(parallel), "aiohttp"]
            sdk = (f"tamesu.models.{shape}", shape) if model is not None else ()
            profiles[size] = counts(profile_run(folder, out_root, suite, parallel, extra, script if floor else None,
                                                sdk))
    finally:
        agent.stop()
        if model is not None:
            model.stop()
    extra_turns = (large - small) * TURNS
    result = []
    for index in (0, 1, 2):
        before, after = profiles[small][index], profiles[large][index]
        result.append({key: (after.get(key, 0) - before.get(key, 0)) / extra_turns
                       for key in set(before) | set(after)})
    return tuple(result)


def table(workload: str, by_package: dict[str, float], by_function: dict[str, float], out_of_tamesu: dict[str, float],
          top: int) -> str:
    total = sum(by_package.values())
    lines = [f"## {workload}: {total:,.0f} calls per turn", "", "| package | calls per turn | share |",
             "| --- | --- | --- |"]
    for name, calls in sorted(by_package.items(), key=lambda item: -item[1]):
        if abs(calls) >= 0.5:
            lines.append(f"| {name} | {calls:,.1f} | {calls / total:.1%} |")
    own = sum(v for k, v in by_package.items() if k in ("tamesu", "builtins from tamesu"))
    lines += ["", f"tamesu's own (its functions and the builtins they call): {own:,.1f} calls per turn", "",
              "| tamesu function | calls per turn (with its builtins) |", "| --- | --- |"]
    for name, calls in sorted(by_function.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"| `{name}` | {calls:,.2f} |")
    lines += ["", "| called by tamesu | calls per turn |", "| --- | --- |"]
    for name, calls in sorted(out_of_tamesu.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"| `{name}` | {calls:,.2f} |")
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], [name for name in sys.argv[3].split(",") if name], sys.argv[5:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("rest", "persona", "both"), default="both")
    parser.add_argument("--shape", choices=("openai", "anthropic"), default="openai",
                        help="the persona workload's model: OpenAI-shaped (chat completions) or Anthropic-shaped")
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=300)
    parser.add_argument("--at-once", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", type=Path, help="copy the profiles to this folder")
    parser.add_argument("--floor", action="store_true",
                        help="also count the bare aiohttp loop's turn (bench/baseline_client.py, persona_baseline.py)")
    args = parser.parse_args()
    global KEEP, SDK_GROUP
    KEEP = args.keep
    SDK_GROUP = f"{args.shape}/httpx"
    folder = Path(tempfile.mkdtemp(prefix="tamesu-calls-"))
    out_root = tmpfs_root() or folder
    figures: dict[str, Any] = {}
    try:
        for workload in ("rest", "persona") if args.workload == "both" else (args.workload,):
            by_package, by_function, out_of_tamesu = per_turn(folder, out_root, workload, args.small, args.large,
                                                              args.at_once, shape=args.shape)
            figures[workload] = {"calls_per_turn": round(sum(by_package.values()), 1),
                                 "by_package": {k: round(v, 1) for k, v in by_package.items()},
                                 "own_calls_per_turn": round(by_package.get("tamesu", 0)
                                                             + by_package.get("builtins from tamesu", 0), 1),
                                 "tamesu_functions": {k: round(v, 2) for k, v in by_function.items()
                                                      if abs(v) >= 0.01}}
            if workload == "persona":
                figures[workload]["shape"] = args.shape
            title = f"{workload} ({args.shape})" if workload == "persona" else workload
            print(table(title, by_package, by_function, out_of_tamesu, args.top), flush=True)
            print()
            if args.floor:
                floor = per_turn(folder, out_root, workload, args.small, args.large, args.at_once, floor=True,
                                 shape=args.shape)[0]
                figures[workload]["floor_calls_per_turn"] = round(sum(floor.values()), 1)
                figures[workload]["floor_by_package"] = {k: round(v, 1) for k, v in floor.items()}
                lines = [f"## {workload}, the bare aiohttp loop: {sum(floor.values()):,.0f} calls per turn", "",
                         "| package | calls per turn |", "| --- | --- |"]
                lines += [f"| {name} | {calls:,.1f} |" for name, calls in sorted(floor.items(), key=lambda i: -i[1])
                          if abs(calls) >= 0.5]
                print("\n".join(lines), flush=True)
                print()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if out_root != folder:
            shutil.rmtree(out_root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--child"]:  # a child is tamesu measured: it arms its own watchdog, as tamesu does
        from _owned import own_children

        own_children()
    raise SystemExit(main())
