"""YAML reading that keeps where every key and item was written, for `file:line:col` errors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.parser import Parser
from ruamel.yaml.scanner import Scanner

from tamesu.errors import ConfigError, Problem


class Document:
    """A parsed YAML file: its plain data, and the tree that remembers positions."""

    def __init__(self, path: Path, tree: Any, label: str | None = None) -> None:
        self.path = path
        self.label = label or str(path)
        self.tree = tree
        self.data = to_plain(tree)

    def position(self, loc: Sequence[Any], *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of the node at `loc` (of its key when `key`), or of its nearest parent."""
        node = self.tree
        line, col = 0, 0
        if hasattr(node, "lc"):
            line, col = node.lc.line, node.lc.col
        for depth, part in enumerate(loc):
            last = depth == len(loc) - 1
            if isinstance(node, CommentedMap) and part in node:
                where = node.lc.key(part) if (last and key) else node.lc.value(part)
                if where is not None:
                    line, col = where
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
                where = node.lc.item(part)
                if where is not None:
                    line, col = where
                node = node[part]
            else:
                break
        return line + 1, col + 1

    def problem(self, loc: Sequence[Any], message: str, *, key: bool = False) -> Problem:
        line, col = self.position(loc, key=key)
        return Problem(self.label, line, col, format_loc(loc), message)


def format_loc(loc: Sequence[Any]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def to_plain(node: Any) -> Any:
    if isinstance(node, CommentedMap):
        return {str(k) if not isinstance(k, str | int | float | bool) else k: to_plain(v) for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [to_plain(v) for v in node]
    if isinstance(node, dict):
        return {k: to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v) for v in node]
    # ruamel scalar subclasses (ScalarFloat, TimeStamp...) become their plain built-in type
    for kind in (bool, int, float, str):
        if isinstance(node, kind):
            # bool before int: True is an int too, and must stay True
            return node if type(node) is kind else kind(node)
    return node


def _parser() -> YAML:
    yaml = YAML(typ="rt")
    # The round-trip constructor keeps every node's line and column; the round-trip scanner and parser only add
    # comment gathering, which tamesu never reads (nothing is written back) and which costs a quarter of the
    # parse: a suite of 400 tests parses in 0.33 s instead of 0.44 s.
    yaml.Scanner = Scanner
    yaml.Parser = Parser
    yaml.allow_duplicate_keys = False
    return yaml


def load_yaml(path: Path, label: str | None = None) -> Document:
    """Parse one YAML file, or raise ConfigError with the line and column of the problem."""
    shown = label or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(shown, 1, 1, "", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(shown, 1, 1, "", f"cannot read the file: {exc}")]) from None
    try:
        tree = _parser().load(text)
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        key = _duplicate_key_name(exc)
        message = f"duplicate key {key!r}" if key else "duplicate key"
        raise ConfigError([Problem(shown, mark.line + 1, mark.column + 1, "", message)]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = (exc.problem or exc.context or "invalid YAML").strip()
        raise ConfigError([Problem(shown, line, col, "", f"YAML syntax error: {what}")]) from None
    return Document(path, tree if tree is not None else CommentedMap(), shown)


def _duplicate_key_name(exc: DuplicateKeyError) -> str | None:
    match = re.search(r'duplicate key "(.*?)"', exc.problem or "")
    return match.group(1) if match else None
