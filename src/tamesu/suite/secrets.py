"""Secrets come from the environment and `.env` files; their values never leave the process."""

from __future__ import annotations

import base64
import copy
import html
import json
import logging
import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from tamesu.errors import Problem, TemplateError
from tamesu.models.spec import PROVIDER_KEY_VARIABLES
from tamesu.suite.templates import may_hold, walk_strings

MASK = "***"
_SECRET_NAMES = re.compile(r"\{\{\s*secrets\.([A-Za-z0-9_-]+)\s*\}\}")
# A value shorter than this would mask ordinary words everywhere; such a secret is not worth hiding by text.
_MIN_REDACTED_LENGTH = 3
_MIN_CUT = 6
_AGENT_DOCUMENTS = frozenset({"response", "raw"})
"""The keys of a turn's record (`AgentTurn`) that hold what the agent sent as it sent it, numbers and all."""
"""The shortest part of a secret, cut at an ellipsis, that is masked: shorter, ordinary words would be."""


def _cut_short(text: str) -> bool:
    """Whether `text` holds an ellipsis, where an excerpt was shortened (`…`, or `...`)."""
    return "…" in text or "..." in text
_MAX_DOTENV_BYTES = 1_000_000
# Below this many bytes the shared part of a base64 text at another alignment is too short to mask safely.
_MIN_BASE64_CORE = 6
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_URL_SAFE_SETS = ("", "/", "/+@!$&'()*,;=:~", "/+@!$&'()*,;=:~?", "/?:@!$'()*,")
"""What encoders leave alone: everything encoded; a path as `urllib.parse.quote` writes it; a path and a query
as httpx (and browsers, after the WHATWG URL standard) write them, keeping `+`, `@`, `=`...; a query parameter's
value as yarl (aiohttp's `with_query`, `params=`) writes one, its `&+=;` encoded and `?/:@` kept."""
_KEPT_ENCODED = ("&+;=", "%#&+;=")
"""What stays encoded in a query read back half decoded: yarl's `query_string` (aiohttp's `request.query_string`,
`path_qs`) decodes all but the query's own delimiters; `human_repr()` (a URL in an aiohttp log line) also `%`, `#`."""


def read_dotenv(path: Path, warnings: list[Problem] | None = None) -> dict[str, str]:
    """KEY=value lines; `export`, quotes and comments as shells write them. A line that is none of these is left
    out, and said in `warnings`: a secret it was meant to hold would otherwise be "not set" with no reason."""
    from tamesu.suite.yaml_reader import read_bounded

    values: dict[str, str] = {}
    try:
        if not path.is_file():
            return values
    except (OSError, ValueError):  # a name longer than the system allows: no such file
        return values
    said = [] if warnings is None else warnings
    first_at: dict[str, int] = {}
    # not UTF-8, NUL bytes or megabytes of garbage: one `file:line:col` problem (ConfigError), never a crash
    for number, raw in enumerate(read_bounded(path, str(path), limit=_MAX_DOTENV_BYTES).splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = re.sub(r"^export\s+", "", line)
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if (why := _dotenv_problem(key, sep, value)) is not None:
            column = raw.find(value[:1]) + 1 if why.startswith("a quote") else len(raw) - len(raw.lstrip()) + 1
            said.append(Problem(_shown(path), number, column, "", why))
            if not sep or not _DOTENV_KEY.fullmatch(key):
                continue
        if key in first_at:  # two values of one secret: the file's author meant one of them
            said.append(Problem(_shown(path), number, len(raw) - len(raw.lstrip()) + 1, "",
                                f"{key} is set again (first on line {first_at[key]}): this later value is used"))
        first_at.setdefault(key, number)
        values[key] = _dotenv_value(value)
    return values


_DOTENV_KEY = re.compile(r"[A-Za-z0-9_.-]+")


def _dotenv_problem(key: str, sep: str, value: str) -> str | None:
    """Why a line of a `.env` file is not what its author meant, or None."""
    if not sep:
        return f"not KEY=value: {key[:40]!r} is left out"
    if not _DOTENV_KEY.fullmatch(key):
        what = "no name before '='" if not key else f"{key[:40]!r} is not a variable name"
        return f"{what}: the line is left out"
    quote = value[:1]
    if quote in ("'", '"'):
        closed = _DOUBLE_QUOTED.match(value) if quote == '"' else re.match(r"'[^']*'", value)
        if closed is None:
            return f"a quote that is never closed: {key} is read with its quote (a value of several lines is not read)"
        if (rest := value[closed.end():].strip()) and not rest.startswith("#"):
            return f"text after the closing quote of {key}: quote the whole value, or start a comment with ' #'"
    return None


def _dotenv_value(value: str) -> str:
    """A quoted value is what is between its quotes, a comment after them dropped (`KEY="abc"  # why` is abc,
    as python-dotenv and shells read it); between double quotes a backslash escapes a quote, a backslash, n, t
    or r (bash and python-dotenv give the agent `ab"cd` for `"ab\\"cd"`: what is sent and masked); an unquoted
    one ends at ` #`."""
    if value[:1] == '"':
        quoted = _DOUBLE_QUOTED.match(value)
        if quoted and (not (rest := value[quoted.end():].strip()) or rest.startswith("#")):
            return _DOTENV_ESCAPE.sub(lambda m: _DOTENV_ESCAPES[m.group(1)], quoted.group(1))
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value[:1] == "'":
        end = value.find(value[0], 1)
        if end > 0 and value[end + 1:].lstrip().startswith("#"):
            return value[1:end]
    return re.sub(r"\s+#.*$", "", value)


_DOUBLE_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_DOTENV_ESCAPE = re.compile(r'\\(["\\ntr])')
_DOTENV_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


class Secrets:
    """Looks secrets up (environment first, then `.env` files) and remembers every value it gave out."""

    def __init__(self, env_files: Iterable[Path] = (), environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._files: dict[str, str] = {}
        self.warnings: list[Problem] = []
        """The lines of the `.env` files that are not KEY=value, each where it is written."""
        files = list(env_files)
        for path in files:
            for key, value in read_dotenv(path, self.warnings).items():
                self._files.setdefault(key, value)
        self.redactor = Redactor()
        self._given: dict[str, str] = {}
        """Each secret handed out, by name: what `as_references` writes back as its template."""
        for variable in PROVIDER_KEY_VARIABLES:  # a key the SDK providers read themselves when no api_key is given
            if self._environ.get(variable):
                self.redactor.add(self._environ[variable])
        places = ["environment", *(_shown(path) for path in files)]
        self.sources = places[0] if len(places) == 1 else f"{', '.join(places[:-1])} or {places[-1]}"
        """Where a secret is looked for, as a user reads it: `environment or .env`."""

    def unset(self, name: str) -> str:
        """The line that says a secret has no value, and where it was looked for."""
        return f"secret {name} is not set ({self.sources})"

    def has(self, name: str) -> bool:
        return name in self._environ or name in self._files

    def mask_named(self, data: object) -> None:
        """Mask from now on every set secret that a template in `data` (a suite or tamesu.yaml, as read) names:
        a secret first sent by a later test is then masked in the files of the tests before it too (it was
        masked only once a template had handed it out, and the first tests' transcripts kept it)."""
        if not may_hold(data, "secrets."):
            return
        for _path, text in walk_strings(data):
            if "secrets." in text:
                for name in _SECRET_NAMES.findall(text):
                    if self.has(name):
                        self(name)

    def __call__(self, name: str) -> str:
        if name in self._environ:
            value = self._environ[name]
        elif name in self._files:
            value = self._files[name]
        else:
            raise TemplateError(self.unset(name))
        self.redactor.add(value)
        if len(value) >= _MIN_REDACTED_LENGTH:
            self._given.setdefault(name, value)
        return value

    def as_references(self, data: object) -> Any:
        """`data` to be written where a user reads and runs it again (`tamesu test --dry-run -o`): each secret
        handed out, as it is, written as its `{{ secrets.NAME }}` (which renders it again), and every other form
        of a secret (encoded, cut) masked, as every artifact masks it."""
        if isinstance(data, str):
            for name, value in sorted(self._given.items(), key=lambda item: -len(item[1])):
                data = data.replace(value, f"{{{{ secrets.{name} }}}}")
            return self.redactor.text(data)
        if isinstance(data, dict):
            return {self.as_references(k): self.as_references(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [self.as_references(v) for v in data]
        return data


def _shown(path: Path) -> str:
    """An env file as the user named it: relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (`ln -s .env .env`)
        return str(path)


def encoded_forms(value: str) -> set[str]:
    """Every way a secret's value is commonly written where tamesu can see it: as it is; URL-encoded as a
    path or query (`%20`; `/`, `+`, `@`... kept or not) and as a form (`+`), with upper- or lower-case `%xx`, and a
    query read back decoded but for its delimiters (`%26`, `%2B`: aiohttp's `request.query_string`); base64
    (standard and URL-safe, padded or not, and the part that any base64 text containing the value at each
    of the three byte alignments must contain, as in a Basic auth header of `user:secret`); the hex of its
    UTF-8 bytes, lower- or upper-case (a key or signature dumped as hex; inside a longer hex text too, which
    keeps byte edges); JSON-escaped (both ASCII-only and not); HTML-escaped. An SDK's error text quotes a URL
    encoded, an agent echoes a token as base64: each form is masked like the value itself."""
    forms = {value}
    quoted_forms = [quote(value, safe=safe) for safe in _URL_SAFE_SETS]
    # a query as yarl (aiohttp) writes one: a space as a form's `+`, the rest as a query keeps it (`&` too)
    in_query = [quoted.replace("%20", "+") for quoted in quoted_forms if "%20" in quoted]
    # a query an agent read back, decoded but for its delimiters, with its space as sent or as shown (`%20`, `+`)
    half = ["".join(f"%{ord(c):02X}" if c in kept else c for c in value) for kept in _KEPT_ENCODED]
    half += [form.replace(" ", space) for form in half if " " in form for space in ("%20", "+")]
    for quoted in [*quoted_forms, *in_query, *half, quote_plus(value), quote_plus(value, safe="/")]:
        forms.add(quoted)
        forms.add(_PERCENT.sub(lambda m: m.group(0).lower(), quoted))
    raw = value.encode()
    for encoded in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms.update({encoded, encoded.rstrip("=")})
    if len(raw) >= _MIN_BASE64_CORE:
        for offset in (1, 2):
            # the characters that depend only on the value's bytes when `offset` bytes come before it
            encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
            start = -(-offset * 8 // 6)
            end = (offset + len(raw)) * 8 // 6
            core = encoded[start:end]
            forms.update({core, core.replace("+", "-").replace("/", "_")})
        plain = base64.b64encode(raw).decode().rstrip("=")
        forms.add(plain[: len(raw) * 8 // 6])  # followed by more bytes, the last character changes
    forms.update({raw.hex(), raw.hex().upper()})
    for ascii_only in (True, False):
        escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        forms.update({escaped, escaped.replace("/", "\\/")})  # `\/` as PHP's json_encode writes a slash
        # JSON in JSON: an agent's reply that holds an escaped secret, quoted again in a check's reason
        forms.update(json.dumps(once, ensure_ascii=twice)[1:-1] for once in (escaped, escaped.replace("/", "\\/"))
                     for twice in (True, False))
    forms.update({html.escape(value), html.escape(value, quote=False)})
    return {form for form in forms if len(form) >= _MIN_REDACTED_LENGTH}


def latin_1_reading(value: str) -> str | None:
    """A value that is not ASCII as a server reads its UTF-8 bytes in a header (Latin-1, as HTTP has it: Starlette,
    every ASGI server): `ümlaut` comes back `Ã¼mlaut` from an agent that echoes the header. None for ASCII."""
    return None if value.isascii() else value.encode().decode("latin-1")


_LIVE: deque[Redactor] = deque(maxlen=16)
"""The last redactors of this process that were given a secret: what the command line's last resort (an internal
error, its traceback) masks with, after the plan that held the run's is gone. Bounded: a process that makes
plans for ever (a test session) keeps no more than these."""


def mask_known(text: str) -> str:
    """`text` with every secret any redactor of this process knows masked."""
    for redactor in list(_LIVE):
        text = redactor.text(text)
    return text


class Redactor:
    """Masks every secret value, in each of its encoded forms, in text and in JSON-like data before it is
    written or printed."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._json_pattern: re.Pattern[str] | None = None
        self._cut_pattern: re.Pattern[str] | None = None
        """A form cut short at an ellipsis (`supersecret-token…`, an excerpt shortened before it was masked): its
        start before one, or its end after one, at least `_MIN_CUT` characters."""

    def add(self, value: str) -> None:
        if len(value) >= _MIN_REDACTED_LENGTH and value not in self._values:
            if not self._values:
                _LIVE.append(self)
            self._values.add(value)
            self._forms |= encoded_forms(value)
            if (misread := latin_1_reading(value)) is not None:
                self._forms |= encoded_forms(misread)
            # longest first, so a value is masked whole before any shorter form inside it
            ordered = sorted(self._forms, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))
            self._json_pattern = None  # made again from the new forms when next asked
            self._cut_pattern = None

    def _cut(self) -> re.Pattern[str]:
        if self._cut_pattern is None:
            heads = {form[:n] for form in self._forms for n in range(_MIN_CUT, len(form))}
            tails = {form[-n:] for form in self._forms for n in range(_MIN_CUT, len(form))}
            self._cut_pattern = re.compile(
                "|".join([*(f"{re.escape(h)}(?=…|\\.\\.\\.)" for h in sorted(heads, key=len, reverse=True)),
                          *(f"(?:(?<=…)|(?<=\\.\\.\\.)){re.escape(t)}" for t in sorted(tails, key=len, reverse=True))])
                or "(?!)")
        return self._cut_pattern

    def text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        masked = self._pattern.sub(MASK, text)
        return self._cut().sub(MASK, masked) if _cut_short(masked) else masked

    def cut_end(self, text: str) -> str:
        """`text` cut short by tamesu with no mark (an answer read up to a size bound) masked: a secret's head at
        its very end too, as before an ellipsis, so the cut keeps no first characters of one."""
        if self._pattern is None or not text:
            return text
        return self._cut().sub(MASK, self.text(text) + "…")[:-1]

    def in_json(self, text: str) -> bool:
        """Whether any secret shows in `text`, JSON written by `json.dumps(..., ensure_ascii=False)`: one search
        instead of a walk over every string, for data that seldom holds one. JSON escapes each character on
        its own, so a secret inside a string is, escaped the same way, inside the text."""
        if self._pattern is None:
            return False
        if self._json_pattern is None:
            escaped = sorted({json.dumps(form, ensure_ascii=False)[1:-1] for form in self._forms}, key=len,
                             reverse=True)
            self._json_pattern = re.compile("|".join(re.escape(form) for form in escaped))
        if self._json_pattern.search(text) is not None:
            return True
        return _cut_short(text) and self._cut().search(text) is not None

    def data(self, value: object) -> Any:
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)) if isinstance(k, str) else k:
                    self.data(self._numbers(v) if k in _AGENT_DOCUMENTS else v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in self._across(value)]
        return value

    def _numbers(self, value: object) -> Any:
        """`value` (what an agent answered) with each number whose digits hold a secret written as masked text: a PIN
        answered as `{"pin": 48213977}` is the secret as surely as `"48213977"`. Only there: tamesu's own typed
        numbers (metrics, counts) stay numbers, read back as such."""
        assert self._pattern is not None
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            digits = repr(value)
            return self.text(digits) if self._pattern.search(digits) else value
        if isinstance(value, dict):
            return {k: self._numbers(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._numbers(v) for v in value]
        return value

    def _across(self, items: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
        """`items` with every secret that is streamed in pieces masked in each piece: the strings at one place
        of consecutive items (an SSE event's `delta`, a chunk's `choices.0.delta.content`) are read joined,
        as the agent's text is, so `{"delta": "sk-ab"}`, `{"delta": "cd-12"}` keep no part of `sk-abcd-12`."""
        assert self._pattern is not None
        if len(items) < 2:
            return items
        places: dict[tuple[object, ...], list[tuple[int, str]]] = {}
        for index, item in enumerate(items):
            for path, text in walk_strings(item):
                places.setdefault(path, []).append((index, text))
        changed: dict[int, Any] = {}
        for path, pieces in places.items():
            if len(pieces) < 2:
                continue
            joined = "".join(text for _, text in pieces)
            spans = [m.span() for m in self._pattern.finditer(joined)]
            start = 0
            for index, text in pieces:
                end = start + len(text)
                # only a secret that crosses this piece's edge: one inside it is masked by `text` as it is
                cut = [(max(a, start) - start, min(b, end) - start) for a, b in spans
                       if a < end and b > start and (a < start or b > end)]
                if cut:
                    masked = text
                    for a, b in reversed(cut):
                        masked = masked[:a] + MASK + masked[b:]
                    item = changed.setdefault(index, copy.deepcopy(items[index]))
                    changed[index] = _replaced(item, path, masked)
                start = end
        return [changed.get(i, item) for i, item in enumerate(items)] if changed else items


def _replaced(value: Any, path: tuple[object, ...], text: str) -> Any:
    """`value` (a copy) with the string at `path` now `text`."""
    if not path:
        return text
    holder = value
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = text
    return value


class MaskingFilter(logging.Filter):
    """Masks secrets in a log record before any handler formats it: the message with its arguments, and the
    traceback text, so a library's warning (an SDK quoting a URL) shows no secret."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self._redactor.text(record.getMessage()), None
        if record.exc_info:
            record.exc_text = self._redactor.text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


def mask_logging(redactor: Redactor, stream: Any = None) -> logging.Handler:
    """Log lines of tamesu and the libraries it uses (warnings and worse) go to stderr with secrets masked;
    handlers already on the root logger (pytest's, a user's) get the same filter."""
    masking = MaskingFilter(redactor)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in [*root.handlers, handler]:
        existing.addFilter(masking)
    root.addHandler(handler)
    return handler
