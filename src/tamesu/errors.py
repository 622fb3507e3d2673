"""The failures tamesu tells apart, each with its exit code."""

from __future__ import annotations

from dataclasses import dataclass, field

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_INFRA = 3
EXIT_BUDGET = 4


def article(word: str) -> str:
    """`word` after "a" or "an", as it is said: "an audio key", "a rest key", "a url", "an unknown"."""
    first = word[:1].lower()
    vowel = first in "aeio" or (first == "u" and not word.lower().startswith(("uni", "use", "usa", "uri", "url")))
    return f"{'an' if vowel else 'a'} {word}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong in what a user wrote, located in the file."""

    file: str
    line: int
    column: int
    path: str
    message: str
    count: int = 1
    """How many problems the line tells of: a "N more problems" line that stands for N unsaid is N."""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        path, message = _excerpt(self.path, PATH_CHARS), _excerpt(self.message, MESSAGE_CHARS)
        return f"{where}: {path}: {message}" if path else f"{where}: {message}"


PATH_CHARS = 160
MESSAGE_CHARS = 1200
"""A problem's line says at most this much of its message: a key or value of 100 kB it quotes is cut, tamesu's own
words whole (a hint listing the metrics a suite's targets measure ran past 600 and was cut in the middle of a name)."""


def _excerpt(text: str, limit: int) -> str:
    """A problem quotes at most a short excerpt of what was written (a 100 kB key stays one readable line): its
    start and end, each cut at a word where there is one, and how much was left out of the `limit` said."""
    if len(text) <= limit:
        return text
    head, tail = text[:limit - 60], text[-20:]
    if " " in head[-60:]:
        head = head[:head.rindex(" ")]
    if " " in tail[:-1]:
        tail = tail[tail.index(" ") + 1:]
    return f"{head}...[{len(text) - len(head) - len(tail):,} more characters: a line says {limit:,}]...{tail}"


@dataclass
class ConfigError(Exception):
    """Everything wrong in a suite or project file, reported at once (exit 2)."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    """What would only have been warned of (a secret not set): `validate` says it beside the problems."""

    def __str__(self) -> str:
        return "\n".join(str(p) for p in self.problems)


class InfraError(Exception):
    """The agent, a server or a tool could not be reached or broke: not the agent's fault (exit 3)."""


class SuiteProblem(InfraError):
    """What a suite asks that only a run can find wrong: a golden file not written yet, an `on_turn` past the
    script, a JSONPath a filled-in value made invalid, a `command` the shell cannot find. Neither the agent's
    failure nor the infrastructure's: the run is an error of `fault: suite` (exit 2, as a problem `validate`
    finds). An InfraError, so every guard that ends a run on one ends it on this too."""


class OwnSideError(InfraError):
    """tamesu's own part fell behind while it talked to the target (its speech-to-text had not read a reply by
    the turn's end): raised where the target's errors are, but never the agent's side (no `agent_error`, which JSONL
    `--yao-errors` counts as the agent's failure): the environment's error (exit 3), whatever the flag."""


class TemplateError(Exception):
    """A template names something that does not exist when it is rendered."""

    def __init__(self, message: str, expr: str | None = None) -> None:
        super().__init__(message)
        self.expr = expr
        """The template's name (`captured.order`) when it named something that has no value."""


class BudgetExceeded(Exception):
    """The run spent more than its budget (exit 4)."""


def os_words(exc: OSError) -> str:
    """Why a file or folder could not be written, in the words a user acts on: a path that runs through a file
    (`--report junit:notes.txt/x.xml`) is said so, not "File exists" or "Not a directory" alone."""
    where = f" ({exc.filename})" if exc.filename else ""
    if isinstance(exc, FileExistsError | NotADirectoryError) and exc.filename:
        return f"a file is in the way of a folder: {exc.filename} (or a folder above it) is a file"
    return f"{exc.strerror or exc}{where}"
