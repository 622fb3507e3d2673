"""The main job: start the example shop agent, run its suite with tamesu, stop the agent.

Usage: python scripts/demo.py [extra `tamesu run` options]. Exits with tamesu's exit code.
Offline: the agent runs on 127.0.0.1 and the suite needs no model.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "rest-shop"
_LISTENING = re.compile(r"listening on (http://\S+)")


def start_agent() -> tuple[subprocess.Popen[str], str]:
    agent = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "agent.py"), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 20
    assert agent.stdout is not None
    while time.monotonic() < deadline:
        line = agent.stdout.readline()
        if not line and agent.poll() is not None:
            break
        if match := _LISTENING.search(line):
            return agent, match.group(1)
    agent.kill()
    raise SystemExit("the example agent did not start within 20 s")


def main() -> int:
    agent, url = start_agent()
    print(f"demo: shop agent at {url}", flush=True)
    try:
        command = [sys.executable, "-m", "tamesu", "run", str(EXAMPLE), *sys.argv[1:]]
        return subprocess.call(command, env={**os.environ, "SHOP_URL": url}, cwd=ROOT)
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=5)
        except subprocess.TimeoutExpired:
            agent.kill()


if __name__ == "__main__":
    sys.exit(main())
