"""How a failure's reason quotes what it read (the agent's turns, a command's output, a rubric): on one line, as
JSON strings (the quotes other reasons use), and bounded, so that a 50 KB answer does not become a 50 KB line of
JUnit, HTML and Markdown; the whole text stays in the run's transcript."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import ValidationError

from tamesu.matching import one_line, quoted

QUOTED = 300
"""Characters of text a reason quotes at most: a few sentences, enough to see what was said instead."""
SAID = 1000
"""Characters of a reason someone else wrote (a model's, a script's) that a verdict keeps."""


def their_line(text: str, limit: int = SAID) -> str:
    """A reason written by someone else (a judge model, a validator agent, a project's script): one line, cut
    with `…` past `limit`. A judge's paragraphs, or a script's `assert ok, run.text` quoting a 50 KB answer,
    were the one line every report shows."""
    return one_line(text, limit)


def exception_line(exc: BaseException) -> str:
    """`ValueError: why`, as one bounded line, for an exception a project's or plug-in's code raised. A pydantic
    ValidationError (a function reading the agent's answer into a model) said its errors over many lines, each
    with the input's repr and a link: its first error, where and why, and how many more, is the line."""
    if isinstance(exc, ValidationError) and exc.error_count():
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the value"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return their_line(f"ValidationError: {exc.title}: {where}: {first['msg']}{more}")
    return their_line(f"{type(exc).__name__}: {exc}")


def quote(text: str, limit: int = QUOTED) -> str:
    """`text` as a reason quotes it: `"one line, cut…"`, the ellipsis inside the quotes."""
    return quoted(text, limit)


def quote_turns(turns: Sequence[str], limit: int = QUOTED) -> str:
    """Turns each quoted, separated by ` / `, whole turns up to about `limit` characters; the turns left out are
    counted (`… and 3 more turns`). A first turn longer than `limit` alone is cut with `…`."""
    shown: list[str] = []
    used = 0
    for turn in turns:
        quoted = json.dumps(one_line(turn), ensure_ascii=False)
        if not shown and len(quoted) > limit:
            shown.append(quote(turn, limit))
            break
        if shown and used + 3 + len(quoted) > limit:
            break
        shown.append(quoted)
        used += len(quoted) + (3 if len(shown) > 1 else 0)
    left = len(turns) - len(shown)
    return " / ".join(shown) + (f" / … and {left} more turn{'' if left == 1 else 's'}" if left else "")

