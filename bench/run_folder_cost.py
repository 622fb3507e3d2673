"""What creating a test's run folder costs on a file system: the layout a run writes for each test
(`suite/test/run-1/` with `transcript.json` and `result.json`, each written to a `.tmp` and renamed), 1000
tests, CPU per test (user + system: the kernel's work creating inodes counts as the process's).

    python bench/run_folder_cost.py [FOLDER ...]     default: the temporary folder, the working tree, /dev/shm

Each folder is measured in a fresh subfolder, removed afterwards. The figure moves with the file system's
state (recent deletions, which block groups are full), so measure the places side by side.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TESTS = 1000
BODY = b"x" * 2000  # about a 5-turn conversation's result.json


def cost_per_test_ms(base: Path) -> float:
    root = Path(tempfile.mkdtemp(prefix="tamesu-folder-cost-", dir=base))
    try:
        started = time.process_time()
        for number in range(TESTS):
            run = root / "suite" / f"t{number}" / "run-1"
            os.makedirs(run, exist_ok=True)
            for name in ("transcript.json", "result.json"):
                temporary = run / f"{name}.tmp"
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, BODY)
                finally:
                    os.close(fd)
                os.replace(temporary, run / name)
        return (time.process_time() - started) / TESTS * 1000
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    places = [Path(p) for p in sys.argv[1:]] or [Path(tempfile.gettempdir()), Path(__file__).resolve().parent,
                                                  Path("/dev/shm")]
    for place in places:
        if place.is_dir() and os.access(place, os.W_OK):
            print(f"{place}: {cost_per_test_ms(place):.3f} ms of CPU per test ({TESTS} tests)")
        else:
            print(f"{place}: not a writable folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
