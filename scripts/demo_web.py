"""The browser demo: serve examples/web-shop (it starts the REST example agent behind its chat widget), run
its suite in Debian's Chromium with the fake models, stop the shop.

Usage: python scripts/demo_web.py [--persona] [extra `tamesu run` options]. Exits with tamesu's exit code.
`--persona` (what `make demo` runs) runs only the test where a persona chats with the shop's widget, and when
the browser extra or Chromium is missing says in one line what to install instead of failing.
Needs the browser extra (pip install -e '.[browser]') and Debian's chromium.
"""

from __future__ import annotations

import os
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "web-shop"


PERSONA_TEST = "order status through the chat widget"


def _missing() -> str | None:
    """What the browser part needs and this machine lacks, as the command that adds it."""
    from tamesu.cli.installed import EXTRAS, SYSTEM, found_binary, missing_packages

    browser = next(e for e in EXTRAS if e.name == "browser")
    chromium = next(p for p in SYSTEM if p.name == "chromium")
    needed = [browser.install] if missing_packages(browser) else []
    needed += [chromium.command] if found_binary(chromium) is None else []
    return " and ".join(needed) or None


def main() -> int:
    args = sys.argv[1:]
    if args[:1] == ["--persona"]:
        missing = _missing()
        if missing:
            print(f"demo: the browser part is skipped: it needs Chromium and the browser extra: {missing}", flush=True)
            return 0
        args = ["--filter", PERSONA_TEST, *args[1:]]
    with running("web shop", [str(EXAMPLE / "shop.py"), "--port", "0"], {"url": r"listening on (http://\S+/)"},
                 timeout=20) as (found, log):
        print(f"demo: web shop at {found['url']}", flush=True)
        return run_suite(EXAMPLE, args, {**os.environ, "WEB_SHOP_URL": found["url"]}, log)


if __name__ == "__main__":
    sys.exit(main())
