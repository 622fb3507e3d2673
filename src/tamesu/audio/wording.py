"""How the simulated user words a line aloud, as people do (`spell_out`, `disfluency` in its behaviours).

The words change before speech synthesis, so what the agent hears and what `audio.wav` holds agree, and the
turn's `said` records the words as spoken.
"""

from __future__ import annotations

import random
import re

_DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
# a code with a digit in it (ORD-1001, 7pm, A12B), or a number
_CODE = re.compile(r"\b(?=[A-Za-z-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*\b")
_FILLERS = ("Um,", "Uh,", "Er,")


def spelled(text: str) -> str:
    """Numbers and codes read one character at a time: "ORD-1001 at 7pm" -> "O R D one zero zero one at seven P
    M"."""
    def out(match: re.Match[str]) -> str:
        return " ".join(_DIGITS[int(c)] if c.isdigit() else c.upper() for c in match.group(0) if c.isalnum())

    return _CODE.sub(out, text)


def hesitant(text: str, rng: random.Random) -> str:
    """`text` with a filler first and, half of the time, its first two words said twice with a break
    ("Um, I want- I want a table"); the choices come from `rng` (seeded per run)."""
    filler = rng.choice(_FILLERS)
    words = text.split()
    restart = " ".join(words[:2]) + "- " if len(words) >= 4 and rng.random() < 0.5 else ""
    return f"{filler} {restart}{text}"
