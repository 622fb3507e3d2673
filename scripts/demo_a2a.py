"""The A2A example: start the shop agent (examples/a2a-shop), run its suite with tamesu, stop the agent.

Usage: python scripts/demo_a2a.py [--protocol both|1.0|0.3] [extra `tamesu run` options]
Exits with tamesu's exit code. Offline: the agent listens on 127.0.0.1 and the suite's models are fake.
`--protocol 0.3` makes the agent's card offer only A2A 0.3, so every target of the suite speaks 0.3.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "a2a-shop"
_JSONRPC = re.compile(r"listening on (http://\S+)")
_GRPC = re.compile(r"gRPC\s+(grpc://\S+)")


def start_agent(env: dict[str, str], protocol: str, log: IO[str]) -> tuple[subprocess.Popen[str], str, str]:
    """The agent, with its JSON-RPC URL and gRPC address once it printed them. Its output goes to `log` (a
    file, not a pipe nobody reads, which would stall a chatty agent)."""
    agent = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "agent.py"), "--port", "0", "--grpc-port", "0", "--protocol", protocol],
        stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        printed = Path(log.name).read_text(encoding="utf-8", errors="replace")
        jsonrpc, grpc = _JSONRPC.search(printed), _GRPC.search(printed)
        if jsonrpc and grpc:
            return agent, jsonrpc.group(1), grpc.group(1)
        if agent.poll() is not None:
            break
        time.sleep(0.05)
    stop_agent(agent)
    raise SystemExit("the A2A shop agent did not start within 30 s:\n"
                     + Path(log.name).read_text(encoding="utf-8", errors="replace"))


def stop_agent(agent: subprocess.Popen[str]) -> None:
    agent.terminate()
    try:
        agent.wait(timeout=10)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait(timeout=5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--protocol", choices=["both", "1.0", "0.3"], default="both")
    ours, tamesu_args = parser.parse_known_args()
    # the agent and the suite share the token; a value already in the environment wins
    env = {**os.environ, "SHOP_A2A_TOKEN": os.environ.get("SHOP_A2A_TOKEN") or "demo-token"}
    with tempfile.NamedTemporaryFile("w+", prefix="a2a-shop-", suffix=".log", encoding="utf-8") as log:
        agent, url, grpc = start_agent(env, ours.protocol, log)
        print(f"demo: A2A shop agent at {url} (gRPC {grpc})", flush=True)
        try:
            command = [sys.executable, "-m", "tamesu", "run", str(EXAMPLE), *tamesu_args]
            code = subprocess.call(command, env={**env, "SHOP_A2A_URL": url, "SHOP_A2A_GRPC": grpc}, cwd=ROOT)
        finally:
            stop_agent(agent)
        if code != 0:
            print("demo: what the agent printed:\n" + Path(log.name).read_text(encoding="utf-8", errors="replace"),
                  file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
