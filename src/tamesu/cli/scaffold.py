"""`tamesu init`: a project file and a first suite that validate as written."""

from __future__ import annotations

import random
import socket
from pathlib import Path

PROJECT = """\
# yaml-language-server: $schema=.tamesu/schema/project.schema.json
# tamesu project file: what every suite of this folder shares.
suites: ["suites/*.yaml"]
out: tamesu-runs
defaults:
  slo:
    turn_latency_ms_p95: 5000      # every test: 95% of turns answered within 5 s
secrets:
  env_files: [.env]               # {{secrets.X}} reads the environment, then these files
"""

FIRST_SUITE = """\
# yaml-language-server: $schema=../.tamesu/schema/suite.schema.json
# A first suite, against the sample agent in agent.py, which the hooks start and stop (tamesu ends it anyway
# when the run ends). To test your own agent: point the target's url at it and delete the hooks; one that keeps
# no conversation of its own is sent it with `body: { messages: "{{messages}}" }` (an AI SDK route:
# "{{ui_messages}}"), and OpenAI-, Anthropic- and AI SDK-shaped answers are read without `response:`.
hooks:
  # Port {port} was free when `tamesu init` wrote this; if another program takes it, write a free one here and in the
  # target's url. The hook fails, saying why, when the port is taken: the suite never tests another server
  before_all:
    - "python3 agent.py --port {port} --pid-file .agent.pid --background"
  after_all:    # runs after a failing before_all too, to clean up what it had set up
    - "python3 agent.py --stop --pid-file .agent.pid"
targets:
  my-agent:
    type: rest
    url: http://127.0.0.1:{port}/chat
    connect: { attempts: 20, backoff: 0.1s }   # the sample agent takes a moment to start
    request:
      body: { message: "{{message}}", session_id: "{{session}}" }
    response:
      text: $.reply

tests:
  - name: greets and answers
    target: my-agent
    tags: [smoke]
    scenario:
      script:
        - say: "Hello! What can you help me with?"
        - say: "Thanks, that is all."
    assert:
      - not_contains: "Traceback"
      - turns: { equals: 2 }
      - metric: { name: turn_latency_ms, lt: 10000 }
"""


AGENT = """\
\"\"\"A sample agent for the first suite: POST /chat {message, session_id} -> {reply}. Standard library only.\"\"\"

import argparse
import json
import os
import signal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Chat(BaseHTTPRequestHandler):
    turns: dict = {}

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        session = str(body.get("session_id", ""))
        Chat.turns[session] = Chat.turns.get(session, 0) + 1
        if Chat.turns[session] == 1:
            reply = "Hello! I am the sample agent: I can answer questions about your orders."
        else:
            reply = "You are welcome. Goodbye!"
        data = json.dumps({"reply": reply}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default={port})
    parser.add_argument("--pid-file")
    parser.add_argument("--background", action="store_true",
                        help="once the port is ours, serve from a child process and exit (as a hook starts it)")
    parser.add_argument("--stop", action="store_true", help="stop the agent the pid file names, if any")
    options = parser.parse_args()
    if options.stop:
        if options.pid_file and os.path.exists(options.pid_file):
            with open(options.pid_file) as handle:
                pid = int(handle.read())
            os.remove(options.pid_file)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        raise SystemExit(0)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", options.port), Chat)
    except OSError as error:
        if options.pid_file and os.path.exists(options.pid_file):
            os.remove(options.pid_file)  # an earlier run's: --stop must not stop what now has its number
        raise SystemExit(f"agent.py: cannot listen on 127.0.0.1:{options.port}: {error.strerror} (write a free "
                         "port in first.yaml, in the before_all hook and the target's url)")
    pid = os.fork() if options.background else 0
    if options.pid_file and (pid or not options.background):
        with open(options.pid_file, "w") as handle:
            handle.write(str(pid or os.getpid()))
    if pid:
        print(f"the sample agent listens on 127.0.0.1:{options.port} (pid {pid})")
    else:
        server.serve_forever()
"""


IGNORED = (".env", "tamesu-runs/", ".tamesu/store.db*", "suites/.agent.pid")
"""What a project's repository should not hold: the secrets file the project reads (`.env`), the run folders (one
per test per run, forever), the local results store, and the sample agent's log and pid files its hooks write.
The replay cache (`.tamesu/cache`) is meant to be committed, so it is not here."""


def ignore_what_runs_leave(directory: Path) -> str | None:
    """`.gitignore` made, or the lines it lacks added: what to say, or None when it had them all. Without it,
    `git add .` in a new project committed its API keys and every run folder."""
    path = directory / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in present]
    if not missing:
        return None
    lead = "" if not text or text.endswith("\n") else "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(lead + "# tamesu: secrets, run folders, the local results store\n" + "\n".join(missing) + "\n")
    return f"wrote {path}" if not text else f"added {', '.join(missing)} to {path}"


def free_port() -> int:
    """A port nothing listens on now, for the sample agent. A fixed one (8790, as the grpc and orchestrator
    examples use) made `tamesu init && tamesu run` fail whenever one of those ran. Drawn from below the ports Linux
    hands to outgoing connections (32768 and up), so a connection of the moment does not hold it later."""
    chooser = random.SystemRandom()
    for _ in range(100):
        port = chooser.randint(20000, 29999)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:  # a machine with that range full: any port the system gives
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_scaffold(directory: Path, left_out: list[str] | None = None) -> list[Path]:
    """The two files, plus the JSON Schemas their first lines point editors at (`tamesu schema --write`
    refreshes them after an upgrade). Local files, so completion works offline and nothing is fetched.
    `left_out` gets the installed plug-ins the schemas could not hold."""
    from tamesu.cli.schema_export import SCHEMA_DIR, write_schemas

    port = str(free_port())
    files = {directory / "tamesu.yaml": PROJECT,
             directory / "suites" / "first.yaml": FIRST_SUITE.replace("{port}", port),
             directory / "suites" / "agent.py": AGENT.replace("{port}", port)}
    for path in files:
        if path.exists():
            raise FileExistsError(str(path))
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    written.extend(write_schemas(directory / SCHEMA_DIR, left_out))
    return written
