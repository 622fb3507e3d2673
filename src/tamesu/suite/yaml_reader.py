"""YAML reading that keeps where every key and item was written, for `file:line:col` errors."""

from __future__ import annotations

import datetime as dt
import errno
import itertools
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.parser import Parser
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scanner import Scanner

from tamesu.errors import ConfigError, Problem
from tamesu.suite import _fast_yaml
from tamesu.suite.surrogates import LONE_ESCAPE, PROBLEM


class Document:
    """A parsed YAML file: its plain data, and the tree that remembers positions."""

    def __init__(self, path: Path, tree: object, label: str | None = None, *, data: Any = None,
                 nodes: Any = None) -> None:
        """`data`: the plain data of `tree` when the reader made it already (else it is made from the tree);
        `nodes`: libyaml's nodes of the text, which place what `tree` would (then `tree` is not made: None)."""
        self.path = path
        self.label = label or str(path)
        self.tree = tree
        self._nodes = nodes
        self.data = to_plain(tree, _Budget(self.label)) if data is None else data

    def position(self, loc: Sequence[object], *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of the node at `loc` (of its key when `key`), or of its nearest parent."""
        if self._nodes is not None:
            line, col = _fast_yaml.position(self._nodes, loc, key)
            return line + 1, col + 1
        node = self.tree
        line, col = 0, 0
        if hasattr(node, "lc"):
            # an empty document's root was made here, not parsed: it has no position
            line, col = node.lc.line or 0, node.lc.col or 0
        for depth, part in enumerate(loc):
            last = depth == len(loc) - 1
            if isinstance(node, CommentedMap) and part in node:
                try:
                    where = node.lc.key(part) if (last and key) else node.lc.value(part)
                except KeyError:  # a key that came from a `<<:` merge has no position of its own
                    where = None
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

    def problem(self, loc: Sequence[object], message: str, *, key: bool = False) -> Problem:
        line, col = self.position(loc, key=key)
        return Problem(self.label, line, col, format_loc(loc), message)


def format_loc(loc: Sequence[object]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            # a key holding a line break (an HTTP header's name) split the problem's one line in two
            part = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(part))
            text += f".{part}" if text else part
    return text


MAX_VALUES = 1_000_000
"""Values a document may expand to. Aliases are shared in the tree; copied out, nine aliases of nine aliases
of ... (a "billion laughs" file of a few hundred bytes) would fill the memory."""


class _Budget:
    def __init__(self, label: str) -> None:
        self.label = label
        self.left = MAX_VALUES

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ConfigError([Problem(self.label, 1, 1, "", f"the document expands to more than {MAX_VALUES:,} "
                                       "values (aliases of aliases?): refused")])


def to_plain(node: object, budget: _Budget | None = None) -> Any:
    if budget is not None:
        budget.spend()
    if isinstance(node, CommentedMap):
        if budget is not None and (odd := next((k for k in node if k is None or not isinstance(k, str | int | float
                                                                                               | bool)), "")) != "":
            # `~: {...}` or `? [a, b]` were made the keys "None" and "('a', 'b')" (a target named None)
            line, col = node.lc.key(odd) if odd in node.lc.data else (0, 0)
            what = "an empty key (~ or null)" if odd is None else "a key that is a list or a mapping"
            raise ConfigError([Problem(budget.label, line + 1, col + 1, "", f"{what}: a key is a name")])
        return {str(k) if not isinstance(k, str | int | float | bool) else k: to_plain(v, budget)
                for k, v in node.items()}
    if isinstance(node, CommentedSeq):
        return [to_plain(v, budget) for v in node]
    if isinstance(node, dict):
        return {k: to_plain(v, budget) for k, v in node.items()}
    if isinstance(node, list):
        return [to_plain(v, budget) for v in node]
    if isinstance(node, dt.date):
        # an unquoted `2026-01-31` in a message's `data` or an answer is text to JSON (it was kept as a date:
        # "Object of type date is not JSON serializable" at run time); a date field (quarantine's `until`)
        # reads the text as pydantic reads any ISO date
        return node.isoformat()
    # ruamel scalar subclasses (ScalarFloat, TimeStamp...) become their plain built-in type
    for kind in (bool, int, float, str):
        if isinstance(node, kind):
            # bool before int: True is an int too, and must stay True
            return node if type(node) is kind else kind(node)
    return node


class _PlacedConstructor(RoundTripConstructor):
    """A value its tag cannot make (`!!float 0,8`, `2026-02-30`) fails with the line and column it was written;
    a tag tamesu does not know (`!python/object`, a `%TAG` shorthand) is refused, never kept or constructed."""

    def construct_unknown(self, node: Any) -> Any:
        raise MarkedYAMLError(problem=f"unknown tag {_short(str(node.tag))[:_EXCERPT]}: suites are plain YAML",
                              problem_mark=node.start_mark)

    def construct_non_recursive_object(self, node: Any, tag: str | None = None) -> object:
        try:
            return super().construct_non_recursive_object(node, tag)
        except MarkedYAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:
            if isinstance(node, ScalarNode) and node.style is None and \
                    str(self.resolver.resolve(ScalarNode, node.value, (True, False))) == str(node.tag):
                # a plain `2026-02-30` YAML takes for a date it cannot make: kept as the text written, for the
                # schema to say what is wrong where it is (a syntax error hid every other problem of the file)
                return str(node.value)
            raise MarkedYAMLError(problem=f"cannot read {_short(str(node.value))[:_EXCERPT]!r}: {exc}",
                                  problem_mark=node.start_mark) from None


_PlacedConstructor.add_constructor(None, _PlacedConstructor.construct_unknown)


def _parser() -> YAML:
    yaml = YAML(typ="rt")
    yaml.Constructor = _PlacedConstructor
    # The round-trip constructor keeps every node's line and column; the round-trip scanner and parser only add
    # comment gathering, which tamesu never reads (nothing is written back) and which costs a quarter of the
    # parse: a suite of 400 tests parses in 0.33 s instead of 0.44 s.
    yaml.Scanner = Scanner
    yaml.Parser = Parser
    yaml.allow_duplicate_keys = False
    return yaml


def load_yaml(path: Path, label: str | None = None) -> Document:
    """Parse one YAML file, or raise ConfigError with the line and column of the problem. Bounded: a file that
    is not a regular one, too large, nested too deep, or that expands without end is one problem, never a
    hang, a traceback or the machine's memory."""
    shown = label or str(path)
    return parse_yaml(read_bounded(path, shown), path, shown)


def parse_yaml(text: str, path: Path, shown: str) -> Document:
    """`text` (read from `path`, called `shown` in problems) parsed as load_yaml does, with the same bounds."""
    document = _parsed(text, path, shown)
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        document.data = _paired(document.data, text, shown)
    return document


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _paired(value: Any, text: str, shown: str) -> Any:
    """Strings with `\\ud83d\\ude00` (an emoji as JSON escapes it, pasted into a double-quoted YAML string, which
    reads each half as a character of its own) made of the character the pair stands for; a half without the
    other is a problem where it is written (it was "internal error: UnicodeEncodeError" when sent)."""
    if isinstance(value, dict):
        return {key: _paired(item, text, shown) for key, item in value.items()}
    if isinstance(value, list):
        return [_paired(item, text, shown) for item in value]
    if isinstance(value, str) and any("\ud800" <= character <= "\udfff" for character in value):
        try:
            return value.encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeDecodeError:
            lone = LONE_ESCAPE.search(text)
            line, col = line_col(text, lone.start()) if lone else (1, 1)
            raise ConfigError([Problem(shown, line, col, "", f"{lone.group(0) if lone else 'a surrogate'} "
                                       f"{PROBLEM}")]) from None
    return value


def _parsed(text: str, path: Path, shown: str) -> Document:
    _prescan(text, shown)
    fast = _fast_yaml.read(text, MAX_VALUES)
    if fast is not None:
        return Document(path, None, shown, data=fast[1], nodes=fast[0])
    if _LONG_LINE.search(text) and (broken := _fast_yaml.syntax_error(text)) is not None:
        # ruamel's scanner takes time quadratic in a key's length (a 10 MB key: a minute and a half)
        line, col, what = broken
        long_key = " (a key is at most 1,024 characters)" if col > 1024 else ""
        raise ConfigError([Problem(shown, line, col, "", f"YAML syntax error: {_short(what)}{long_key}")])
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
        opened = exc.context_mark if exc.problem_mark is not None else None
        where = f" at line {opened.line + 1}, column {opened.column + 1}" if opened is not None else ""
        hint = _hint(what, where, lines_before=opened is not None and opened.line + 1 < line)
        raise ConfigError([Problem(shown, line, col, "", f"YAML syntax error: {_short(what)}{hint}")]) from None
    except ReaderError as exc:
        line, col = line_col(text, exc.position)
        raise ConfigError([Problem(shown, line, col, "", f"cannot read the file: {_short(str(exc.reason))}")]) \
            from None
    except RecursionError:
        raise ConfigError([Problem(shown, 1, 1, "", "nested too deeply to read")]) from None
    except (ValueError, TypeError, OverflowError, KeyError, AttributeError) as exc:
        # a scalar its tag cannot make (`!!float 0,8`, `2026-02-30`, an integer of 5,000 digits), or a merge
        # (`<<:`) of something that is not a mapping; the constructor gives no position, the value is quoted
        raise ConfigError([Problem(shown, 1, 1, "", f"cannot read a value: {_short(str(exc))}")]) from None
    if _expanded_size(tree, {}) > MAX_VALUES:
        raise ConfigError([Problem(shown, 1, 1, "", f"the document expands to more than {MAX_VALUES:,} values "
                                   "(aliases of aliases?): refused")])
    try:
        return Document(path, tree if tree is not None else CommentedMap(), shown)
    except RecursionError:
        raise ConfigError([Problem(shown, 1, 1, "", "nested too deeply to read")]) from None


MAX_FILE_BYTES = 20_000_000
MAX_DEPTH = 200
"""Nesting a suite never needs; ruamel recurses once per level, and 10,000 levels took seconds to fail."""
MAX_DIGITS = 300
MAX_ITEMS = 50_000
"""List items in one file: block items (`- ...` lines) and the items of flow lists (`[a, b, c]`). An honest
suite of 5,000 generated tests (five items each) reads in two seconds and must run; 50,000 items of anything
read in under two, so the cap bounds the time of a runaway file without refusing real ones (aliases, which
multiply what was written, are bounded apart by MAX_VALUES); a cases_file has no limit."""
MAX_FLOW = 50_000
"""Flow collections (`[...]`, `{...}`) in one file: each is a node the parser builds, as a list item is, and
a file of nothing but `[]` kept the bracket scan busy for seconds."""
MAX_KEYS = 50_000
"""Mapping keys in one file (counted as `: ` and `":` in the text, so a colon in prose counts too): 100,000
keys took seconds to read, and ruamel's reader a thousand times as long."""
MAX_LINE = 10_000
"""A line this long is read by libyaml first: a file it refuses is refused in its words, never scanned by
ruamel, whose time grows with the square of a key's length."""
_EXCERPT = 60


def _expanded_size(node: object, seen: dict[int, int]) -> int:
    """How many values `node` becomes once its aliases are copied out; shared nodes are counted once each
    time they are used but measured once, so this is linear in what was written."""
    if not isinstance(node, dict | list):
        return 1
    known = seen.get(id(node))
    if known is not None:
        return known
    seen[id(node)] = 1  # a node that contains itself (a recursive alias) counts once, not forever
    children = node.values() if isinstance(node, dict) else node
    total = 1
    for child in children:
        total += _expanded_size(child, seen)
        if total > MAX_VALUES:
            break
    seen[id(node)] = total
    return total


_HINTS = (
    ("found character '\\t'", "a tab: YAML indents with spaces"),
    ("but got ':'", "quote a value that holds ': '"),
    ("mapping values are not allowed", "quote a value that holds ': ', or check this line's indentation"),
    ("but got '<stream end>'", "a '{{' or '[' opened{where} is never closed"),
    ("found unexpected end of stream", "a quote opened{where} is never closed"),
    ("expected <block end>", "this line's indentation does not match the lines above it"),
    ("could not find expected ':'", "a key without ': ' after it, or a quote left open"),
)
"""The parser's words for the usual slips, and what to change (its words alone name its own grammar)."""


def _hint(what: str, where: str, *, lines_before: bool = False) -> str:
    """What to change for the parser's words `what`; `where` (` at line 6, column 18`) is where the construct the
    parser was in began (an unclosed quote or bracket), `lines_before` when that is on an earlier line."""
    if lines_before and "<stream end>" not in what and (closing := re.search(r"expected ',' or '([}\]])'", what)):
        # a '}' left out where more follows (the next `- item`): the parser stops a line late, at what follows
        return f" (a {'{' if closing.group(1) == '}' else '['!r} opened{where} is not closed before this)"
    return next((f" ({hint.format(where=where)})" for words, hint in _HINTS if words in what), "")


def _short(text: str) -> str:
    """Error messages quote at most a short excerpt of what was written."""
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:200] + "..."


def line_col(text: str, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, column(text, offset)


def column(text: str, offset: int) -> int:
    """The 1-based column of `offset` in its line."""
    return offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_bounded(path: Path, shown: str, *, limit: int = MAX_FILE_BYTES) -> str:
    """A file's text: only a regular file (never a FIFO or a device, which would block or never end), at most
    `limit` bytes, UTF-8 without NUL bytes (a byte-order mark is dropped). Raises ConfigError naming where."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        dangling = os.path.islink(path)  # named as written; where it points said after
        why = f"file not found (a symlink to {_short(os.readlink(path))}, which does not exist)" if dangling else \
            "file not found"
        raise ConfigError([Problem(shown, 1, 1, "", why)]) from None
    except OSError as exc:
        reason = "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise ConfigError([Problem(shown, 1, 1, "", f"cannot read the file: {reason}")]) from None
    except ValueError:  # a NUL byte in the name (`rules: "r\0.yaml"`): no file can be called that
        raise ConfigError([Problem(shown.replace("\0", "\\0"), 1, 1, "", "no file can be named that: the name "
                                   "holds a NUL byte")]) from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError([Problem(shown, 1, 1, "", "is a folder, not a file")])
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode) or \
            stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file"
        raise ConfigError([Problem(shown, 1, 1, "", f"cannot read the file: it is {kind}, not a regular file")])
    if info.st_size > limit:
        raise ConfigError([Problem(shown, 1, 1, "", f"the file is {info.st_size:,} bytes; at most {limit:,} "
                                   "are read")])
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError([Problem(shown, 1, 1, "", f"cannot read the file: {exc.strerror or exc}")]) from None
    if len(data) > limit:
        raise ConfigError([Problem(shown, 1, 1, "", f"the file is larger than {limit:,} bytes")])
    return decode_text(data, shown)


def decode_text(data: bytes, shown: str) -> str:
    """Bytes read as a file is (`read_bounded`, or `tamesu test -i -`'s stdin): UTF-8 without NUL bytes, a
    byte-order mark dropped. Raises ConfigError naming where."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = line_col(data[:exc.start].decode("utf-8", errors="replace"), exc.start)
        raise ConfigError([Problem(shown, line, col, "", "not UTF-8 text (a binary file?): "
                                   f"byte 0x{data[exc.start]:02x}")]) from None
    nul = text.find("\x00")
    if nul >= 0:
        line, col = line_col(text, nul)
        raise ConfigError([Problem(shown, line, col, "", "a NUL byte: not a text file")])
    return text


_ITEMS = re.compile(r"^[ \t]*- ", re.MULTILINE)
_BRACKETS = re.compile(r"[\[\]{}]")
_OPENING = re.compile(r"[\[{]")
_KEYS = re.compile(r"""(?<=["'])[ \t]*:|:(?=[ \t\r\n]|$)""", re.MULTILINE)
_LONG_LINE = re.compile(r"^[^\n]{" + str(MAX_LINE) + ",}", re.MULTILINE)
_DIGITS = re.compile(r"(?<![\w.])[-+]?\d{" + str(MAX_DIGITS + 1) + ",}")


def _prescan(text: str, shown: str) -> None:
    """What the parser would take seconds or crash on, found in one pass over the text."""
    block = [m.end() - 2 for m in _ITEMS.finditer(text)]  # at the dash
    # a flow list's items are where its commas are: never more than the file's commas
    flow = _scan_brackets(text, shown, commas=len(block) + text.count(",") > MAX_ITEMS) \
        if "[" in text or "{" in text else []
    indent = max(map(len, _INDENTS.findall(text)), default=0)
    if indent > MAX_DEPTH * 8:
        raise ConfigError([Problem(shown, 1, 1, "", f"indented more than {MAX_DEPTH * 8} columns: nested too deep")])
    if len(block) + len(flow) > MAX_ITEMS:
        # said where the first item past the limit is, so the list that grew too long is found at once
        over = sorted(block + flow)[MAX_ITEMS]
        line, col = line_col(text, over)
        raise ConfigError([Problem(shown, line, col, "", f"more than {MAX_ITEMS:,} list items in one file (item "
                                   f"{MAX_ITEMS + 1:,} is here): put many cases in a cases_file (CSV or JSON), "
                                   "which reads far faster")])
    if text.count(":") > MAX_KEYS:
        keys = _KEYS.finditer(text)
        past = next(itertools.islice(keys, MAX_KEYS, None), None)
        if past is not None:
            line, col = line_col(text, past.start())
            raise ConfigError([Problem(shown, line, col, "", f"more than {MAX_KEYS:,} mapping keys in one file "
                                       f"(key {MAX_KEYS + 1:,} ends here): put many cases in a cases_file "
                                       "(CSV or JSON), which reads far faster")])
    found = _DIGITS.search(text) if _may_hold_a_long_number(text) else None
    if found:
        line, col = line_col(text, found.start())
        raise ConfigError([Problem(shown, line, col, "", f"a number of more than {MAX_DIGITS} digits")])


_TWO_DIGITS = re.compile(r"\d\d")
_SAMPLE_STEP = (MAX_DIGITS + 1) // 2


def _may_hold_a_long_number(text: str) -> bool:
    """False when `text` has no run of more than MAX_DIGITS digits, found on one character in _SAMPLE_STEP: such
    a run covers two consecutive sampled characters. (_DIGITS over every character of 10 MB took 0.15 s.)"""
    return len(text) > MAX_DIGITS and _TWO_DIGITS.search(text[::_SAMPLE_STEP]) is not None


def _scan_brackets(text: str, shown: str, *, commas: bool = True) -> list[int]:
    """One pass over the brackets: refuses nesting deeper than MAX_DEPTH, and returns where each item of a
    flow list (`[a, b]`) after its first starts (the commas directly inside square brackets), at most
    MAX_ITEMS + 1 of them; none without `commas` (the file has too few commas to matter). Quotes are not
    parsed (a quoted comma inside a flow list counts too): this only has to find files far too large, never
    to read them."""
    opening = text.count("[") + text.count("{")
    if opening > MAX_FLOW:
        over = next(itertools.islice(_OPENING.finditer(text), MAX_FLOW, None))
        line, col = line_col(text, over.start())
        raise ConfigError([Problem(shown, line, col, "", f"more than {MAX_FLOW:,} flow collections ([...] or "
                                   f"{{...}}) in one file (number {MAX_FLOW + 1:,} is here)")])
    if not commas and (opening <= MAX_DEPTH or _deepest(text) <= MAX_DEPTH):
        return []  # the loop below, a few calls a bracket, only to say where the nesting goes too deep
    found: list[int] = []
    opened: list[str] = []
    after = 0
    for bracket in _BRACKETS.finditer(text):
        if commas and opened and opened[-1] == "[" and len(found) <= MAX_ITEMS:
            found += _commas(text, after, bracket.start())
        after = bracket.end()
        if bracket.group() in "[{":
            opened.append(bracket.group())
            if len(opened) > MAX_DEPTH:
                line, col = line_col(text, bracket.start())
                raise ConfigError([Problem(shown, line, col, "", f"nested more than {MAX_DEPTH} levels deep")])
        elif opened:
            opened.pop()
    return found


_STEPS = {"[": 1, "{": 1, "]": -1, "}": -1}
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_INDENTS = re.compile(r"(?:^|(?<=[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029])) +", re.MULTILINE)
"""Each line's leading spaces, its lines as `str.splitlines` makes them."""


def _deepest(text: str) -> int:
    """How deep the brackets of `text` nest, summed at C speed; MAX_DEPTH + 1 when a bracket closes with none
    open (the loop of `_scan_brackets` skips it, a sum would not), for that loop to say."""
    brackets = _NOT_BRACKETS.sub("", text)
    if min(itertools.accumulate(map(_STEPS.__getitem__, brackets)), default=0) < 0:
        return MAX_DEPTH + 1
    return max(itertools.accumulate(map(_STEPS.__getitem__, brackets)), default=0)


def _commas(text: str, start: int, end: int) -> list[int]:
    found: list[int] = []
    at = text.find(",", start, end)
    while at >= 0 and len(found) <= MAX_ITEMS:
        found.append(at)
        at = text.find(",", at + 1, end)
    return found


def _duplicate_key_name(exc: DuplicateKeyError) -> str | None:
    match = re.search(r'duplicate key "(.*?)"', exc.problem or "")
    return match.group(1) if match else None
