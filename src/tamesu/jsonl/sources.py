"""`-i INPUT`: where test cases come from.

- `agents:NAME?count=10&focus=edge-cases&complexity=medium`: a model under `models:` generates them;
- `scripts:module:function?k=v`: a Python function generates them (either prefix in any case, `Agents:NAME`,
  when no space follows it: `Agents: who answers?` is a message);
- an existing file, or a name ending in .jsonl / .json / .ndjson with no space in it (a path mistyped is
  "file not found", not a message): a JSONL file;
- an existing folder: every JSONL file directly in it (`.jsonl`, `.ndjson`), in name order;
- `-`: JSONL test cases read from stdin (the earlier revision's fourth input source), which a person's replies
  (`--interactive`) can then not come from;
- anything else: one message, run as one standard test case (`-n` is then required). The design's "direct
  message, auto-detected as non-file": `"Please open report.json"` is a message.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl

from tamesu.errors import ConfigError, Problem

_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class InputSource:
    kind: Literal["file", "folder", "message", "agents", "scripts", "stdin"]
    value: str
    """The path, the message, the model name, or `module:function`."""
    params: dict[str, str] = field(default_factory=dict)
    text: str = ""
    """As given on the command line."""


def _is(text: str, kind: str) -> bool:
    """A message longer than a file name may be (or with a NUL byte) is a message, not an OSError."""
    try:
        return Path(text).is_file() if kind == "file" else Path(text).is_dir()
    except (OSError, ValueError):
        return False


def parse_input(text: str) -> InputSource:
    if text == "-":  # never the message "-": no user means it, and every shell tool means stdin by it
        return InputSource("stdin", text, text=text)
    for prefix in ("agents", "scripts"):
        body, _, query = text[len(prefix) + 1:].partition("?")
        # `Agents:gen` is a generator too (a capital from a shell's history or a doc's heading); a message that
        # only begins with the word ("Agents: who answers?") has a space where a name never has one
        if text.startswith(f"{prefix}:") or (text[:len(prefix) + 1].lower() == f"{prefix}:"
                                             and not any(c.isspace() for c in body)):
            return InputSource(prefix, body, dict(parse_qsl(query, keep_blank_values=True)), text)
    if _is(text, "folder"):
        return InputSource("folder", text, text=text)
    if _is(text, "file") or (text.lower().endswith(_FILE_SUFFIXES) and not any(c.isspace() for c in text)):
        return InputSource("file", text, text=text)
    return InputSource("message", text, text=text)


def read_stdin(shown: str = "stdin") -> str:
    """The test cases piped in, bounded as a file is; raises ConfigError naming `shown`."""
    from tamesu.suite.yaml_reader import MAX_FILE_BYTES, decode_text

    data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError([Problem(shown, 1, 1, "", f"stdin gave more than {MAX_FILE_BYTES:,} bytes")])
    return decode_text(data, shown)
