"""The example phone agent (examples/phone-agent: an IVR on Debian's baresip) in a process of its own."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from lifeline import tied

ROOT = Path(__file__).resolve().parent.parent.parent
AGENT = ROOT / "examples" / "phone-agent" / "agent.py"


def missing() -> str | None:
    """Why the phone agent cannot run here, or None."""
    for tool, package in (("baresip", "baresip-core"), ("espeak-ng", "espeak-ng"), ("sox", "sox")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package})"
    try:
        import pjsua2  # noqa: F401
    except ImportError:
        return "pjsua2 is not installed (pip install 'tamesu[sip]')"
    return None


@dataclass
class PhoneAgent:
    process: subprocess.Popen[str]
    uri: str
    trigger: str
    lines: list[str] = field(default_factory=list)
    """What the agent printed after it started: one `event TYPE PARAM` line per baresip event."""

    def events(self, kind: str) -> list[str]:
        return [line.split(" ", 2)[2] if line.count(" ") >= 2 else "" for line in self.lines
                if line.startswith(f"event {kind}")]

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # read always: a full pipe would stall the agent
            self.lines.append(line.strip())

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(*args: str) -> PhoneAgent:
    return ready(spawn(*args))


def spawn(*args: str) -> subprocess.Popen[str]:
    """The agent's process, not yet listening (`ready` waits for it): agents spawned one after the other start
    side by side (each speaks its prompts first, 3-5 s at load 4-10). From the thread that lives as long as the
    agent: it is tied to that thread (`lifeline.tied`)."""
    return subprocess.Popen(tied([sys.executable, str(AGENT), *args]), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def ready(process: subprocess.Popen[str]) -> PhoneAgent:
    """The spawned agent once it listens (killed, and an error raised, when it does not within 30 s)."""
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    said: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        said.append(line.strip())
        if match := re.search(r"listening (sip:\S+) trigger (http://\S+)", line):
            agent = PhoneAgent(process, match.group(1), match.group(2))
            threading.Thread(target=agent._drain, daemon=True).start()
            return agent
    process.kill()
    raise RuntimeError(f"the phone agent did not start: {' | '.join(said[-5:])}")
