"""The phone example: start the IVR agent (examples/phone-agent, on Debian's baresip), run its suite with tamesu
(tamesu calls it over SIP, listens, presses keys), stop the agent.

Usage: python scripts/demo_phone.py [extra `tamesu run` options]
Exits with tamesu's exit code. Offline: everything listens on 127.0.0.1, the judge is fake, the speech models
come from their packages. Needs `tamesu[voice,sip]` and the Debian packages baresip-core, espeak-ng and sox.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from agents import phone  # noqa: E402  (the tests' launcher of the example agent)


def main() -> int:
    missing = phone.missing()
    if missing:
        print(f"the phone demo cannot run here: {missing}", file=sys.stderr)
        return 3
    agent = phone.start()
    try:
        env = {**os.environ, "PHONE_AGENT_URI": agent.uri, "HF_HUB_OFFLINE": "1"}
        return subprocess.run([sys.executable, "-m", "tamesu", "run", "ivr.tamesu.yaml", *sys.argv[1:]],
                              cwd=ROOT / "examples" / "phone-agent", env=env, check=False).returncode
    finally:
        agent.stop()


if __name__ == "__main__":
    sys.exit(main())
