"""`TAMESU_SIP_LOG`: PJSIP's log of a call (every SIP message sent and received) in the run's `sip.log`.

The worker sends its log lines up the pipe rather than writing a file itself: the test process knows the run's
secrets, so the lines are masked before anything reaches the disk.
"""

from __future__ import annotations

import os
import re

from tamesu.conversation import Session
from tamesu.suite.secrets import MASK

VARIABLE = "TAMESU_SIP_LOG"
LOG_NAME = "sip.log"
MESSAGES_LEVEL = 4
"""PJSIP logs each SIP message it sends or receives at level 4: any lower level would leave the signalling out."""
_DIGEST = re.compile(r'(\b(?:c?nonce|response|opaque)\s*=\s*)("[^"]*"|[^,\s]+)', re.IGNORECASE)
"""A digest answer's response (with its nonces, the means to test guessed passwords against it offline)."""


def log_level() -> int:
    """PJSIP's log level the variable asks for: 0 (unset, empty or 0) none; 1 to 6 the SIP messages at least,
    more of PJSIP's own detail up to 6. Raises ValueError for anything else."""
    value = os.environ.get(VARIABLE, "").strip()
    if not value:
        return 0
    if not value.isdigit() or not 0 <= int(value) <= 6:
        raise ValueError(f"{VARIABLE}={value!r} is not a log level: write 1 (the SIP messages) to 6 (all of "
                         "PJSIP's detail), or 0 for none")
    level = int(value)
    return max(level, MESSAGES_LEVEL) if level else 0


def write_log(session: Session, lines: list[str], password: str | None) -> None:
    """The call's log, masked, in the run's folder (nothing when no line was logged)."""
    if not lines:
        return
    text = "\n".join(lines) + "\n"
    if password:  # a literal trunk password is no secret the redactor knows; PJSIP never sends it, but be sure
        text = text.replace(password, MASK)
    text = _DIGEST.sub(lambda m: f'{m.group(1)}"{MASK}"', session.redactor.text(text))
    session.artifacts_dir.mkdir(parents=True, exist_ok=True)
    (session.artifacts_dir / LOG_NAME).write_text(text, encoding="utf-8")
