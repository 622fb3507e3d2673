"""The main job: start the example shop agent, run its suite with tamesu, stop the agent.

Usage: python scripts/demo.py [extra `tamesu run` options]. Exits with tamesu's exit code.
Offline: the agent runs on 127.0.0.1 and the suite needs no model.
"""

from __future__ import annotations

import os
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "rest-shop"


def main() -> int:
    with running("example shop agent", [str(EXAMPLE / "agent.py"), "--port", "0"],
                 {"url": r"listening on (http://\S+)"}, timeout=20) as (found, log):
        print(f"demo: shop agent at {found['url']}", flush=True)
        return run_suite(EXAMPLE, sys.argv[1:], {**os.environ, "SHOP_URL": found["url"]}, log)


if __name__ == "__main__":
    sys.exit(main())
