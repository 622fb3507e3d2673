"""A faster reader for the plain YAML most suites are: libyaml (PyYAML's C parser) composes the nodes, and the
values and positions are made here as the round-trip reader (ruamel, YAML 1.2) makes them.

ruamel's round-trip reader runs in pure Python: about 1.2 ms per test of a suite, as much CPU as a REST turn;
this reader takes 0.18 ms (a 400-test suite: 472 ms against 71 ms). What it is not sure to read exactly as
ruamel does it declines (returns None) and the caller parses with ruamel, which also words every error: tags, anchors,
aliases and merge keys, a `%YAML` or `%TAG` directive, several documents, tabs, NEL/LS/PS, lines of spaces
only, block scalar headers other than chomping and one digit, keys that are not scalars or that repeat, empty
values (`key:` with nothing after it), and plain scalars that YAML 1.2 makes into anything but
a string, null, a boolean, a decimal integer without leading zeros or a decimal fraction (hex, octal,
exponents, `.inf`, timestamps, `=`). Plain scalars are resolved by ruamel's own YAML 1.2 resolver, so `on`,
`no` and `yes` stay strings as they do there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from ruamel.yaml.resolver import VersionedResolver

try:
    import yaml
except ImportError:  # pragma: no cover - PyYAML is a dependency; without it every file goes to ruamel
    yaml = None  # type: ignore[assignment]  # None says PyYAML is missing

_LOADER: Any = getattr(yaml, "CSafeLoader", None) if yaml is not None and yaml.__with_libyaml__ else None
_DEFAULT_TAGS: dict[object, str] = {} if yaml is None else {
    yaml.ScalarNode: "tag:yaml.org,2002:str", yaml.SequenceNode: "tag:yaml.org,2002:seq",
    yaml.MappingNode: "tag:yaml.org,2002:map"}
_COMPOSER: Any = None

if _LOADER is not None:
    class _Composer(_LOADER):  # type: ignore[misc]
        """libyaml's loader, its nodes tagged without PyYAML's YAML 1.1 resolution (a regular expression or more per
        plain scalar, and calls of its own): `_scalar` resolves a plain scalar as ruamel's YAML 1.2 resolver does and
        reads no other tag of it; a quoted scalar, a list or a mapping gets the default tag, as PyYAML gives it. A tag
        written in the file sends the file to ruamel before it is parsed (`_declined`)."""

        def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
            del value, implicit
            return _DEFAULT_TAGS[kind]

    _COMPOSER = _Composer

# What ruamel reads otherwise than libyaml or this module would: a tag (`!`), an anchor (`&`) or an alias (`*`)
# at the start of a token, a merge key, a directive, a tab (libyaml takes `a: b<TAB>c`, ruamel refuses it), and
# NEL, LS and PS, line breaks to libyaml's YAML 1.1 but not to YAML 1.2 (every later line number would differ),
# and a line of spaces only (leading such lines in a block scalar, more indented than its text, ruamel refuses).
# Found anywhere (even inside a quoted string) the file is declined: a slower read, never a different one.
_INDICATOR = re.compile(r"(?:^|[\s\[{,])[!&*]", re.MULTILINE)
_DIRECTIVE = re.compile(r"^%", re.MULTILINE)
_SPACES_LINE = re.compile(r"^ +$", re.MULTILINE)
_DECLINED_CHARACTERS = ("\t", "\x85", "\u2028", "\u2029", "<<")


def _declined(text: str) -> bool:
    """Whether any of the above is in `text`: each pattern is searched only when a substring it needs is there
    (found at C speed); a regular expression over every character cost 50 ns each, half a second on 10 MB."""
    return (any(character in text for character in _DECLINED_CHARACTERS)
            or (("!" in text or "&" in text or "*" in text) and _INDICATOR.search(text) is not None)
            or ("%" in text and _DIRECTIVE.search(text) is not None)
            or ((" \n" in text or text.endswith(" ")) and _SPACES_LINE.search(text) is not None))


_BLOCK_HEADER = re.compile(r"(?:^|\s)[|>](\S*)", re.MULTILINE)
"""A block scalar's indicator and what follows it up to a space: only `[+-]` and one indentation digit are
certain to be read alike (libyaml takes `>#-`, which ruamel refuses); a `>` or `|` inside a plain scalar that
is followed by other characters sends the file to ruamel too, at no risk."""
_HEADER_OK = re.compile(r"(?:[+-]?[1-9]?|[1-9][+-])\Z")
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\.[0-9]+\Z")
_STR, _NULL, _BOOL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_IMPLICIT: dict[object, list[tuple[str, object]]] = VersionedResolver(version=(1, 2)).versioned_resolver
"""ruamel's YAML 1.2 implicit resolvers by first character, read once: its `resolve` looks the document's
version up again on every scalar, which was half of this reader's time."""


class _Declined(Exception):
    pass


def available() -> bool:
    return _LOADER is not None


def read(text: str, max_values: int) -> tuple[Any, Any] | None:
    """(nodes, data): libyaml's composed nodes, which `position` places a key or value in as ruamel's tree
    (CommentedMap / CommentedSeq with line and column) would, and the plain data; None when ruamel must read this text
    (also when it holds more than `max_values` values, which ruamel's path refuses in its own words)."""
    if _LOADER is None or _declined(text):
        return None
    if ("|" in text or ">" in text) and any(not _HEADER_OK.match(found.group(1))
                                            for found in _BLOCK_HEADER.finditer(text)):
        return None
    try:
        node = yaml.compose(text, Loader=_COMPOSER)
    except yaml.YAMLError:
        return None  # ruamel says what is wrong, with its own words and position
    if node is None:
        return None
    try:
        data = _data(node, [max_values])
    except (_Declined, RecursionError):
        return None
    return None if data is None else (node, data)  # a null document: ruamel's path makes it an empty mapping


def syntax_error(text: str) -> tuple[int, int, str] | None:
    """libyaml's syntax error in `text` (line, column, problem), or None when it reads the text or is missing.
    For text ruamel would take seconds to refuse (a key millions of characters long): libyaml's scanner
    refuses it at once, and a file libyaml cannot parse, ruamel refuses too."""
    if _LOADER is None:
        return None
    try:
        for _ in yaml.parse(text, Loader=_LOADER):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return line, col, (exc.problem or exc.context or "invalid YAML").strip()
    except yaml.YAMLError:
        return None
    return None


def _data(node: Any, left: list[int]) -> object:
    """The plain data of `node`, every check that sends a file to ruamel made on the way."""
    left[0] -= 1
    if left[0] < 0:
        raise _Declined
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node)
    if isinstance(node, yaml.SequenceNode):
        if node.tag != "tag:yaml.org,2002:seq":
            raise _Declined
        return [_data(item, left) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            raise _Declined
        plain: dict[object, object] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _Declined
            key = _scalar(key_node)
            if key is None or key in plain:
                raise _Declined  # ruamel refuses a duplicate key with its position, and names a null key
            plain[key] = _data(value_node, left)
        return plain
    raise _Declined


def position(node: Any, loc: Sequence[object], key: bool) -> tuple[int, int]:
    """0-based line and column of what `loc` names in the nodes `read` returned (of its key when `key`), or of its
    nearest parent: where ruamel's tree of the same text places it (`Document.position`), read from the nodes, so
    no tree is made for a file (ruamel's containers are pure Python: two thirds of reading a suite)."""
    # a document that is one scalar was no container of ruamel's, with no position: its first line and column
    line, col = (0, 0) if isinstance(node, yaml.ScalarNode) else (node.start_mark.line, node.start_mark.column)
    for depth, part in enumerate(loc):
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if _scalar(k) == part), None)
            if found is None:
                break
            mark = found[0].start_mark if key and depth == len(loc) - 1 else found[1].start_mark
            node = found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            mark = node.start_mark
        else:
            break
        line, col = mark.line, mark.column
    return line, col


@functools.lru_cache(maxsize=4096)
def _implicit_tag(value: str) -> str:
    """The tag ruamel's resolver gives a plain scalar (its `resolve`, for YAML 1.2, without the lookups);
    remembered, as a suite says the same keys and words test after test."""
    for tag, pattern in [*_IMPLICIT.get(value[0] if value else "", ()), *_IMPLICIT.get(None, ())]:
        if pattern.match(value):
            return str(tag)
    return _STR


def _scalar(node: Any) -> object:
    value = node.value
    if not value and not node.style:
        # an empty value (`key:`): libyaml places it after the colon, ruamel at the next token
        raise _Declined
    if node.style:  # quoted or a block scalar: a string, unless a tag said otherwise
        if node.tag != _STR:
            raise _Declined
        return value
    tag = _implicit_tag(value)
    if tag == _STR:
        return value
    if tag == _NULL:
        return None
    if tag == _BOOL:
        return value in ("true", "True", "TRUE")
    if tag == _INT_TAG and _INT.match(value):
        return int(value)
    if tag == _FLOAT_TAG and _FLOAT.match(value):
        return float(value)
    raise _Declined
