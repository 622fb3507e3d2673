"""The example phone agent (examples/phone-agent: an IVR on Debian's baresip) in a process of its own."""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import subprocess
import sys
import tempfile
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


@functools.cache
def _prompts() -> Path:
    """The agents' spoken prompts, kept for every agent this process starts (`--prompt-cache`; some 1 MB a
    prompt with its silent tail, removed at exit): speaking them loaded Piper in each agent, 4-13 s of a
    test's wall clock per agent on the 2-core machine (the four agents of one test: 23 s)."""
    folder = Path(tempfile.mkdtemp(prefix="tamesu-phone-prompts-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def start(*args: str) -> PhoneAgent:
    """One agent, started and listening."""
    return start_all([list(args)])[0]


def start_all(argss: list[list[str]]) -> list[PhoneAgent]:
    """Agents (each with its own arguments), all listening; if one fails, all are stopped. The first starts
    alone and speaks the prompts they share into the cache, the others then start side by side (four agents
    speaking at once loaded Piper four times over on two cores)."""
    agents: list[PhoneAgent] = []
    processes: list[subprocess.Popen[str]] = []
    try:
        for batch in (argss[:1], argss[1:]):
            processes += [subprocess.Popen(tied([sys.executable, str(AGENT), "--prompt-cache", str(_prompts()), *args]),
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                          for args in batch]
            agents += [_listening(process) for process in processes[len(agents):]]
    except BaseException:
        for agent in agents:
            agent.stop()
        for process in processes[len(agents):]:
            process.kill()
            process.wait()
        raise
    return agents


def _listening(process: subprocess.Popen[str]) -> PhoneAgent:
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
