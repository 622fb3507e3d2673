"""The traced example: start the shop agent of examples/traced-agent exporting its OpenTelemetry spans to the
receiver tamesu runs, run its suite, stop the agent.

Usage: python scripts/demo_traced.py [extra `tamesu run` options]. Exits with tamesu's exit code.
Offline: the agent and the receiver listen on 127.0.0.1 and the suite's models are fake.
"""

from __future__ import annotations

import os
import socket
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "traced-agent"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    # one port for both sides: the agent's exporter sends where tamesu's receiver (traces.receive) will listen
    port = os.environ.get("TRACES_PORT") or str(_free_port())
    own = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_EXPORTER_OTLP_")}
    # only the agent exports to the receiver: tamesu itself would export its own spans there too, and keep
    # trying after the receiver stopped
    agent_env = {**own, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
    with running("traced shop agent", [str(EXAMPLE / "agent.py"), "--port", "0"],
                 {"url": r"listening on (http://\S+)"}, agent_env, timeout=20) as (found, log):
        print(f"demo: traced shop agent at {found['url']}, its spans to 127.0.0.1:{port}", flush=True)
        return run_suite(EXAMPLE, sys.argv[1:], {**own, "TRACES_PORT": port, "TRACED_AGENT_URL": found["url"]},
                         log)


if __name__ == "__main__":
    sys.exit(main())
