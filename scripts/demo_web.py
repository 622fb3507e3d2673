"""The browser demo: serve examples/web-shop (it starts the REST example agent behind its chat widget), run
its suite in Debian's Chromium with the fake models, stop the shop.

Usage: python scripts/demo_web.py [extra `tamesu run` options]. Exits with tamesu's exit code.
Needs the browser extra (pip install -e '.[browser]') and Debian's chromium.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "web-shop"
_LISTENING = re.compile(r"listening on (http://\S+/)")


def start_shop() -> tuple[subprocess.Popen[str], str]:
    shop = subprocess.Popen([sys.executable, str(EXAMPLE / "shop.py"), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    assert shop.stdout is not None
    while time.monotonic() < deadline:
        line = shop.stdout.readline()
        if not line and shop.poll() is not None:
            break
        if match := _LISTENING.search(line):
            return shop, match.group(1)
    shop.kill()
    raise SystemExit("the web shop did not start within 20 s")


def main() -> int:
    shop, url = start_shop()
    print(f"demo: web shop at {url}", flush=True)
    try:
        command = [sys.executable, "-m", "tamesu", "run", str(EXAMPLE), *sys.argv[1:]]
        return subprocess.call(command, env={**os.environ, "WEB_SHOP_URL": url}, cwd=ROOT)
    finally:
        shop.terminate()
        try:
            shop.wait(timeout=10)
        except subprocess.TimeoutExpired:
            shop.kill()


if __name__ == "__main__":
    sys.exit(main())
