"""The browser demo: serve examples/web-shop (it starts the REST example agent behind its chat widget), run
its suite in Debian's Chromium with the fake models, stop the shop.

Usage: python scripts/demo_web.py [extra `tamesu run` options]. Exits with tamesu's exit code.
Needs the browser extra (pip install -e '.[browser]') and Debian's chromium.
"""

from __future__ import annotations

import os
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "web-shop"


def main() -> int:
    with running("web shop", [str(EXAMPLE / "shop.py"), "--port", "0"], {"url": r"listening on (http://\S+/)"},
                 timeout=20) as (found, log):
        print(f"demo: web shop at {found['url']}", flush=True)
        return run_suite(EXAMPLE, sys.argv[1:], {**os.environ, "WEB_SHOP_URL": found["url"]}, log)


if __name__ == "__main__":
    sys.exit(main())
