"""The rest target's exchange alone, another commit's source against the working tree's: `Http.fetch` of a turn's
request (build, send, read, decode) against `bench/agents.py`, one at a time in one process per side, CPU per
request; the sides alternate, and the figure is the median of each pair's own ratio.

    python bench/rest_fetch.py [--before REV] [--pairs P] [--requests N]

Closer than a whole `tamesu run` can come on a shared machine: no start-up, no engine, the same agent process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import checkout  # noqa: E402  (bench/ is a folder of scripts, not a package)
from run import PYTHON, ROOT, Agent  # noqa: E402


async def _fetches(url: str, requests: int) -> float:
    from tamesu.conversation import Session
    from tamesu.suite.schema import ConnectSpec
    from tamesu.suite.secrets import Secrets
    from tamesu.suite.templates import Context
    from tamesu.targets.rest.http import Http

    folder = Path(tempfile.mkdtemp(prefix="tamesu-fetch-"))
    secrets = Secrets(environ={})
    session = Session(context=Context(vars={}, captured={}, secrets=secrets), artifacts_dir=folder,
                      redactor=secrets.redactor, run_id="bench", base_dir=folder)
    http = Http(session=session, connect=ConnectSpec(), pool_timeout=60, what="rest target", max_bytes=10_000_000)
    body = {"message": "step 1", "session_id": "bench"}
    try:
        for _ in range(200):  # warm: the connection, the caches
            await http.fetch(http.build("POST", url, {}, body, has_body=True))
        started = time.process_time()
        for _ in range(requests):
            await http.fetch(http.build("POST", url, {}, body, has_body=True))
        return (time.process_time() - started) / requests * 1000
    finally:
        await http.aclose()
        shutil.rmtree(folder, ignore_errors=True)


def _side(src: Path, url: str, requests: int) -> float:
    done = subprocess.run([PYTHON, __file__, "--child", url, str(requests)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(src), "PWD": str(src.parent)}, cwd=src.parent,
                          check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        print(asyncio.run(_fetches(sys.argv[2], int(sys.argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--requests", type=int, default=3000)
    args = parser.parse_args()
    agent = Agent()
    ms: dict[str, list[float]] = {"before": [], "after": []}
    try:
        with tempfile.TemporaryDirectory(prefix="tamesu-fetch-") as temporary:
            folder = Path(temporary)
            sources = {"before": checkout(args.before, folder / "before"),
                       "after": Path(shutil.copytree(ROOT / "src", folder / "after" / "src"))}
            for number in range(args.pairs):
                for side in ("before", "after") if number % 2 == 0 else ("after", "before"):
                    ms[side].append(_side(sources[side], f"{agent.url}/chat", args.requests))
    finally:
        agent.stop()
    ratios = [a / b for a, b in zip(ms["after"], ms["before"], strict=True)]
    print(f"Http.fetch, CPU per request: before ({args.before}) {statistics.median(ms['before']):.3f} ms, after "
          f"{statistics.median(ms['after']):.3f} ms; after/before {statistics.median(ratios):.3f}x (pairs "
          f"{', '.join(f'{r:.2f}' for r in ratios)}; load average {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
