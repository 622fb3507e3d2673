"""The example shop (examples/rest-shop): a copy of its folder in a temporary place and its agent running,
for tests that run the example suite as a user would (sharding, merging, the pytest plugin)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lifeline import tied

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "rest-shop"


@contextmanager
def example_shop(folder: Path, agent_says: dict[str, str] | None = None) -> Iterator[tuple[Path, str]]:
    """(the copied example folder, the agent's URL); the agent stops when the block ends. `agent_says`: text of
    the copied agent.py replaced before it starts (`{'"shipped"': '"in transit"'}`: an agent gone wrong)."""
    copy = folder / "rest-shop"
    # its suite and project file only: never the runs someone left in the example folder
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("tamesu-runs", "__pycache__", ".tamesu"))
    source = (copy / "agent.py").read_text(encoding="utf-8")
    for old, new in (agent_says or {}).items():
        assert old in source, old
        source = source.replace(old, new)
    (copy / "agent.py").write_text(source, encoding="utf-8")
    agent = subprocess.Popen(tied([sys.executable, str(copy / "agent.py"), "--port", "0"]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert agent.stdout is not None
        deadline = time.monotonic() + 20
        url = None
        while url is None and time.monotonic() < deadline:
            line = agent.stdout.readline()
            if not line and agent.poll() is not None:
                break
            if match := re.search(r"listening on (http://\S+)", line):
                url = match.group(1)
        assert url, "the example agent did not start"
        # keep reading what it prints, so a full pipe never blocks it
        threading.Thread(target=agent.stdout.read, daemon=True).start()
        yield copy, url
    finally:
        agent.terminate()
        try:
            agent.wait(timeout=5)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
