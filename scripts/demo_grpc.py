"""The gRPC example: start the shop agent (examples/grpc-agent), run its suite with tamesu, stop the agent.

Usage: python scripts/demo_grpc.py [extra `tamesu run` options]
Exits with tamesu's exit code. Offline: the agent listens on 127.0.0.1 and the suite's judge is fake.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "grpc-agent"
_LISTENING = re.compile(r"listening on (grpc://\S+)")


def start_agent(env: dict[str, str], log: IO[str]) -> tuple[subprocess.Popen[str], str]:
    """The agent and its address once it printed it. Its output goes to `log` (a file, not a pipe nobody
    reads, which would stall it: it prints a line per turn)."""
    agent = subprocess.Popen([sys.executable, str(EXAMPLE / "agent.py"), "--port", "0"], stdout=log,
                             stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _LISTENING.search(Path(log.name).read_text(encoding="utf-8", errors="replace"))
        if found:
            return agent, found.group(1)
        if agent.poll() is not None:
            break
        time.sleep(0.05)
    stop_agent(agent)
    raise SystemExit("the gRPC shop agent did not start within 30 s:\n"
                     + Path(log.name).read_text(encoding="utf-8", errors="replace"))


def stop_agent(agent: subprocess.Popen[str]) -> None:
    agent.terminate()
    try:
        agent.wait(timeout=10)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait(timeout=5)


def main() -> int:
    # the agent and the suite share the token; a value already in the environment wins
    env = {**os.environ, "GRPC_AGENT_TOKEN": os.environ.get("GRPC_AGENT_TOKEN") or "demo-token"}
    with tempfile.NamedTemporaryFile("w+", prefix="grpc-agent-", suffix=".log", encoding="utf-8") as log:
        agent, url = start_agent(env, log)
        print(f"demo: gRPC shop agent at {url}", flush=True)
        try:
            command = [sys.executable, "-m", "tamesu", "run", str(EXAMPLE), *sys.argv[1:]]
            code = subprocess.call(command, env={**env, "GRPC_AGENT_URL": url}, cwd=ROOT)
        finally:
            stop_agent(agent)
        if code != 0:
            print("demo: what the agent printed:\n" + Path(log.name).read_text(encoding="utf-8", errors="replace"),
                  file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
