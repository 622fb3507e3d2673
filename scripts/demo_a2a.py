"""The A2A example: start the shop agent (examples/a2a-shop), run its suite with tamesu, stop the agent.

Usage: python scripts/demo_a2a.py [--protocol both|1.0|0.3] [extra `tamesu run` options]
Exits with tamesu's exit code. Offline: the agent listens on 127.0.0.1 and the suite's models are fake.
`--protocol 0.3` makes the agent's card offer only A2A 0.3, so every target of the suite speaks 0.3.
"""

from __future__ import annotations

import argparse
import os
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "a2a-shop"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--protocol", choices=["both", "1.0", "0.3"], default="both")
    ours, tamesu_args = parser.parse_known_args()
    # the agent and the suite share the token; a value already in the environment wins
    env = {**os.environ, "SHOP_A2A_TOKEN": os.environ.get("SHOP_A2A_TOKEN") or "demo-token"}
    args = [str(EXAMPLE / "agent.py"), "--port", "0", "--grpc-port", "0", "--protocol", ours.protocol]
    with running("A2A shop agent", args, {"url": r"listening on (http://\S+)", "grpc": r"gRPC\s+(grpc://\S+)"},
                 env) as (found, log):
        print(f"demo: A2A shop agent at {found['url']} (gRPC {found['grpc']})", flush=True)
        return run_suite(EXAMPLE, tamesu_args,
                         {**env, "SHOP_A2A_URL": found["url"], "SHOP_A2A_GRPC": found["grpc"]}, log)


if __name__ == "__main__":
    sys.exit(main())
