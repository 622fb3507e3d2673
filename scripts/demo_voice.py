"""The voice demo: start examples/realtime-agent (Bella's booking line over the Realtime protocol), let a
persona book a table by voice (its words spoken through Piper, the agent answering in audio, both heard back
by Whisper), stop the agent. The run folder keeps the conversation's `audio.wav`; its HTML report plays it.

Usage: python scripts/demo_voice.py [extra `tamesu run` options]. Exits with tamesu's exit code.
Offline: the agent runs on 127.0.0.1, the voices and the speech model come inside their packages.
"""

from __future__ import annotations

import os
import sys

from _examples import ROOT, run_suite, running

EXAMPLE = ROOT / "examples" / "realtime-agent"


def main() -> int:
    from tamesu.audio.extra import problem

    missing = problem()
    if missing:
        print(f"demo: the voice part is skipped: {missing}", flush=True)
        return 0
    with running("realtime agent", [str(EXAMPLE / "agent.py"), "--port", "0"], {"url": r"(ws://\S+/v1/realtime)"},
                 timeout=30) as (found, log):
        print(f"demo: voice agent at {found['url']}", flush=True)
        return run_suite(EXAMPLE, ["--filter", "book a table by voice", *sys.argv[1:]],
                         {**os.environ, "REALTIME_URL": found["url"]}, log)


if __name__ == "__main__":
    sys.exit(main())
