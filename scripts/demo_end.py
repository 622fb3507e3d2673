"""The demo's last words: each example's newest HTML report (and the voice conversation's recording), and how
to open the history of these runs in `tamesu view`.

Usage: python scripts/demo_end.py [SECONDS]: only runs from the last SECONDS (default 900) are named, so an
old run of an example this demo skipped is not shown as if it had just run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _examples import ROOT

EXAMPLES = ["a2a-shop", "grpc-agent", "rest-shop", "realtime-agent", "web-shop", "traced-agent"]


def newest_run(example: Path, since: float) -> Path | None:
    runs = example / "tamesu-runs"
    found = [p for p in runs.iterdir() if (p / "report.html").is_file()] if runs.is_dir() else []
    newest = max(found, key=lambda p: p.stat().st_mtime, default=None)
    return newest if newest is not None and newest.stat().st_mtime >= since else None


def main() -> int:
    since = time.time() - (float(sys.argv[1]) if len(sys.argv) > 1 else 900)
    print("\ndemo: the HTML reports (open them in a browser):")
    for name in EXAMPLES:
        run = newest_run(ROOT / "examples" / name, since)
        if run is None:
            continue
        print(f"  {name:15} {(run / 'report.html').relative_to(ROOT)}")
        for wav in sorted(run.glob("**/audio.wav"))[:1]:  # the report plays it; the file is there too
            print(f"  {'':15} {wav.relative_to(ROOT)} (the whole conversation, both voices)")
    print("demo: every run is also in the history (on by default; `make demo` keeps one for all the examples):")
    print("  .venv/bin/tamesu view        (from this folder: it opens .tamesu/store.db at http://127.0.0.1:8765/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
