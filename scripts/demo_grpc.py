"""The gRPC example: start the shop agent (examples/grpc-agent), run its suite with tamesu, stop the agent.

Usage: python scripts/demo_grpc.py [extra `tamesu run` options]
Exits with tamesu's exit code. Offline: the agent listens on 127.0.0.1 and the suite's judge is fake.
"""

from __future__ import annotations

import os
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "grpc-agent"


def main() -> int:
    # the agent and the suite share the token; a value already in the environment wins
    env = {**os.environ, "GRPC_AGENT_TOKEN": os.environ.get("GRPC_AGENT_TOKEN") or "demo-token"}
    with running("gRPC shop agent", [str(EXAMPLE / "agent.py"), "--port", "0"],
                 {"url": r"listening on (grpc://\S+)"}, env) as (found, log):
        print(f"demo: gRPC shop agent at {found['url']}", flush=True)
        return run_suite(EXAMPLE, sys.argv[1:], {**env, "GRPC_AGENT_URL": found["url"]}, log)


if __name__ == "__main__":
    sys.exit(main())
