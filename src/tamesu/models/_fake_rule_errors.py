"""A fake model's bad rules, when the fake is built from Python rather than from a suite (a suite's rules are
checked by `plan` with the suite's own reader): one line per problem, every one at once, each at the best place
there is. Rules read from a file say `FILE:LINE:COL: rules[N].key: problem`, as suite errors do; rules handed
over as a list have no file, so the rule's index is their place: `rules[N].key: problem`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

Found = tuple[int, tuple[Any, ...], str, bool]
"""A problem: the rule's index, the key path inside the rule, what is wrong, whether it is about the key itself
(a misspelt key is placed at the key, a bad value at the value)."""


class RuleErrors(ValueError):
    """Every bad rule, one line each (`lines`); the message is those lines."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


def guessed(key: str, known: list[str]) -> str:
    """A key as written, with the known one it may be a misspelling of; a known key is never "did you mean"
    itself (`'reason' (did you mean 'reason'?)`)."""
    close = [] if key in known else difflib.get_close_matches(key, known, n=1)
    return f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key)


def validation_problems(index: int, exc: ValidationError, model: type[BaseModel], kind: str) -> list[Found]:
    """Pydantic's errors for one rule, in the words a suite's errors use."""
    keys = [info.alias or name for name, info in model.model_fields.items()]
    found: list[Found] = []
    for error in exc.errors():
        loc = tuple(part for part in error["loc"] if not str(part).startswith("function-"))
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(loc[-1]), keys, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (keys: {', '.join(keys)})"
            found.append((index, loc, f"not {'an' if kind[0] in 'aeiou' else 'a'} {kind} rule key{hint}", True))
        elif error["type"] == "missing":
            found.append((index, loc[:-1], f"missing required key {loc[-1]!r}", False))
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            found.append((index, loc, message[:1].lower() + message[1:], False))
    return found


def _path(index: int, loc: tuple[Any, ...]) -> str:
    return f"rules[{index}]" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def listed(problems: Sequence[Found]) -> RuleErrors:
    """Rules handed over as a list: the index is the place."""
    return RuleErrors([f"{_path(index, loc)}: {message}" for index, loc, message, _ in problems])


def in_file(problems: Sequence[Found], path: Path, text: str) -> RuleErrors:
    """Rules read from `path` (its `text`): each problem at its line and column."""
    try:
        data = YAML(typ="rt").load(text)  # the round-trip reader keeps where each item and key was written
    except YAMLError:
        data = None
    if isinstance(data, Mapping) and "rules" in data:
        data = data["rules"]
    return RuleErrors([f"{path}:{_where(data, index, loc, at_key)}: {_path(index, loc)}: {message}"
                       for index, loc, message, at_key in problems])


def _where(data: Any, index: int, loc: tuple[Any, ...], at_key: bool) -> str:
    """`LINE:COL` (1-based) of the rule's item, or of the key or value `loc` names in it when known."""
    line, col = 0, 0
    try:
        line, col = data.lc.item(index)
        node: Any = data[index]
        for number, part in enumerate(loc):
            kept = node.lc  # ruamel's positions of this node's items and keys
            if not isinstance(node, Mapping):
                line, col = kept.item(part)
            elif at_key and number == len(loc) - 1:
                line, col = kept.key(part)
            else:
                line, col = kept.value(part)
            node = node[part]
    except (AttributeError, KeyError, IndexError, TypeError):
        pass  # a place deeper than the reader kept: the nearest one found stands
    return f"{line + 1}:{col + 1}"
