"""Matching values the way a user means them, shared by assertions and by targets that answer tool calls, and
showing them (and any text) the way a line quotes them.

A number written as text equals the number, `true` is not `1`, and a string in an expected argument that is
not equal may be a full regular expression.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping

ELLIPSIS = "…"
"""What stands where a line was cut: one character, counted in its bound."""
_SPACES = re.compile(r"\s{2,}|[^\S ]")
r"""White space worth a look (a run, or a lone break or tab; a lone plain space, most of them, is left alone):
one with a line break or a tab in it (any white space but a plain space) is folded, runs of plain spaces are kept
(`_folded`). Found whole and then looked at: `\s*[^\S ]\s*` took time growing with the square of a run of
spaces (11 s for 30,000 of them in an agent's answer)."""
_ZWJ = "\u200d"


def one_line(text: str, limit: int | None = None, *, width: Callable[[str], int] | None = None) -> str:
    """`text` as a line quotes it (a failure's reason, a report's cell, an error): each line break or tab, with
    the white space around it, as one space, the ends stripped. With `limit`, a longer line is cut to at most
    `limit` with `…` as its last character: at the end of a word (before a space), unless that keeps less than
    half of what fits (one long word, a URL: cut inside it), and never inside what reads as one character (a
    letter and its accent, a joined or skin-toned emoji, a flag). The bound counts characters, not bytes;
    `width` says how wide a character is written where that is not one (a JSON string's escapes)."""
    flat = _SPACES.sub(_folded, text).strip()
    if limit is None:
        return flat
    if width is None:
        if len(flat) <= limit:
            return flat
        end = max(limit - 1, 0)
    else:
        # as far as the bound only: a value of megabytes is not measured whole to show 120 characters of it
        room, end, used = limit - width(ELLIPSIS), 0, 0
        for char in flat:
            used += width(char)
            if used > limit:
                break
            end += 1 if used <= room else 0
        else:
            return flat
    while 0 < end < len(flat) and _joined(flat, end):
        end -= 1
    cut = flat[:end]
    if end < len(flat) and flat[end] != " ":  # the cut is inside a word: back to the word's end
        at_space = cut.rfind(" ")
        if at_space > end // 2:
            cut = cut[:at_space]
    return cut.rstrip() + ELLIPSIS


def _folded(run: re.Match[str]) -> str:
    """`"a  b"` is what it is, and an expected `"a  b"` beside a found `"a b"` must not read the same: only a run
    with a line break or a tab in it becomes one space."""
    spaces = run.group()
    return spaces if spaces.count(" ") == len(spaces) else " "


def quoted(text: str, limit: int | None = None) -> str:
    """`text` as a line quotes what someone said (an agent, a model, a server): in double quotes, JSON's escapes,
    on one line and cut as `one_line` cuts, the `…` inside the quotes. A Python repr put single quotes (double
    ones when the text had an apostrophe) and a `\\n` for each line break."""
    return json.dumps(one_line(text, limit), ensure_ascii=False)


def _joined(text: str, at: int) -> bool:
    """Whether a cut before `text[at]` splits what reads as one character."""
    before, after = text[at - 1], text[at]
    if unicodedata.category(after).startswith("M") or _ZWJ in (before, after):
        return True  # an accent, a keycap's ring; the parts of a joined emoji
    if "\ufe00" <= after <= "\ufe0f" or "\U0001f3fb" <= after <= "\U0001f3ff" or "\U000e0020" <= after <= "\U000e007f":
        return True  # a variation (text or emoji), a skin tone, a subdivision flag's tags
    if _flag_letter(after):
        letters = 0
        while at - letters > 0 and _flag_letter(text[at - letters - 1]):
            letters += 1
        return letters % 2 == 1  # a flag is two letters: an odd run before the cut ends in half of one
    return False


def _flag_letter(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"


def show(value: object, limit: int = 120) -> str:
    """A value as it should read in a reason line: text on one line and cut at a word (`one_line`), JSON for
    structures (cut as `fitted` cuts them)."""
    if isinstance(value, str):
        return one_line(value, limit)
    return fitted(value, limit)


_ROOM = 8
"""Characters below which a value cut to fit is not worth showing: `…` stands for it."""
_KEY = 40
"""Characters of an object's key shown at most: the keys are the shape, their values the rest."""


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def fitted(value: object, limit: int = 120) -> str:
    """`value` as JSON text of at most about `limit` characters, cut inside so that it still reads as what it is:
    a string keeps its quotes (`"Your order ships…"`), an array its first items and `…` for the rest, an object
    each key it has room for, its values shortened alike (`{"id": 1, "items": [{"sku": "A-1", …}, …], "note":
    "Left at…"}`). Cut at `limit` characters, the text lost its closing quote or brace, and with it where the
    value ended and the keys after the first long one."""
    full = _json(value)
    if len(full) <= limit:
        return full
    if isinstance(value, str):
        return _fitted_text(value, limit)
    if isinstance(value, Mapping):
        return _fitted_object([(_fitted_text(str(key), _KEY) + ": ", item) for key, item in value.items()], limit)
    if isinstance(value, list | tuple):
        return _fitted_array(list(value), limit)
    # a number or another scalar: its text is what it is; a value that is not JSON reads as its text
    return full if not full.startswith('"') else _fitted_text(str(value), limit)


def _fitted_array(items: list[object], limit: int) -> str:
    """The first items whole while they fit, the next cut to the room left, `…` for the others."""
    parts: list[str] = []
    used = 2
    for index, item in enumerate(items):
        gap = 2 if parts else 0
        rest = 0 if index == len(items) - 1 else 3  # ", …" after it
        whole = _json(item)
        if used + gap + len(whole) + rest <= limit:
            parts.append(whole)
            used += gap + len(whole)
            continue
        room = limit - used - gap - rest
        cut = fitted(item, room) if room >= _ROOM else ""
        parts.append(cut if cut and len(cut) <= room else "…")
        if cut and len(cut) <= room and rest:
            parts.append("…")
        break
    return "[" + ", ".join(parts) + "]"


def _fitted_object(pairs: list[tuple[str, object]], limit: int) -> str:
    """Every key there is room for (a key is the shape of the value), the room shared among their values: the
    short ones whole, the long ones cut alike; `…` for the keys left out."""
    room = limit - 2
    count = 0
    least = 0
    for key, item in pairs:
        # a key with its value, or a beginning of it worth reading (`"note": "Left a…"`)
        least += len(key) + min(len(_json(item)), _ROOM) + (2 if count else 0)
        rest = 5 if count + 1 < len(pairs) else 0  # ", …"
        if least + rest > room:
            break
        count += 1
    if count == 0:
        return "{…}"
    kept = pairs[:count]
    budget = room - 2 * (count - 1) - (5 if count < len(pairs) else 0)
    needs = [len(key) + len(_json(item)) for key, item in kept]
    given = [0] * count
    left = budget
    for turn, index in enumerate(sorted(range(count), key=lambda i: needs[i])):
        given[index] = min(needs[index], left // (count - turn))
        left -= given[index]
    parts = []
    for (key, item), need, share in zip(kept, needs, given, strict=True):
        if share >= need:
            parts.append(key + _json(item))
            continue
        cut = fitted(item, share - len(key)) if share - len(key) >= 3 else ""
        parts.append(key + (cut if cut and len(cut) <= share - len(key) else "…"))
    return "{" + ", ".join(parts + (["…"] if count < len(pairs) else [])) + "}"


def _fitted_text(text: str, limit: int) -> str:
    """`text` as a JSON string of at most `limit` characters (its escapes counted as written); one that does not
    fit is cut as `one_line` cuts, `…` inside the quotes."""
    quoted = _json(text)
    if len(quoted) <= limit:
        return quoted
    return _json(one_line(text, max(limit - 2, 2), width=_written))


def _written(char: str) -> int:
    """How many characters `char` takes in a JSON string: `\\"` two, a control character six."""
    return len(_json(char)) - 2


def number_text(value: float) -> str:
    """1500.0 reads as 1500; 0.051234 as 0.051234."""
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def shown(value: object, limit: int = 120) -> str:
    """`show` for a reason line: strings quoted on one line, floats as a person writes them (1500, not 1500.0)."""
    if isinstance(value, float):
        return number_text(value)
    return fitted(value, limit)


def shown_apart(expected: object, found: object, limit: int = 120) -> tuple[str, str]:
    """`expected` and `found` as `shown` puts them, except two strings alike in their first `limit` characters:
    each from a little before where they differ (`"…ships on Friday"`, `"…ships on Monday"`), where the same
    cut of both read the same and hid the difference the reason is about."""
    if not isinstance(expected, str) or not isinstance(found, str):
        return shown(expected, limit), shown(found, limit)
    alike = next((i for i, (a, b) in enumerate(zip(expected, found, strict=False)) if a != b),
                 min(len(expected), len(found)))
    if alike < limit // 2 or (len(_json(expected)) <= limit and len(_json(found)) <= limit):
        return shown(expected, limit), shown(found, limit)
    start = alike - limit // 3
    # from a word's start when there is one near, not from the middle of a word
    space = expected.find(" ", start, alike)
    start = space + 1 if 0 <= space < start + 20 else start
    return (_fitted_text("…" + expected[start:], limit), _fitted_text("…" + found[start:], limit))


def as_number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def same(found: object, expected: object) -> bool:
    """Equality that forgives a number written as text ("42" and 42), because captures and YAML disagree."""
    if isinstance(found, str) != isinstance(expected, str) and _scalar(found) and _scalar(expected):
        text, other = (found, expected) if isinstance(found, str) else (expected, found)
        if other is None or isinstance(other, bool):
            return text == json.dumps(other)
        return bool(as_number(text) == other)
    if isinstance(found, bool) or isinstance(expected, bool):
        # Python says True == 1; a user who wrote `true` did not mean 1.
        return type(found) is type(expected) and found == expected
    return bool(found == expected)


def args_problem(expected: object, actual: object, where: str = "args") -> str | None:
    """Why `actual` does not match `expected` (the rules of the module docstring), or None when it does."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return f"{where} is {shown(actual)}, not a mapping"
        for key, value in expected.items():
            if key not in actual:
                return f"{where}.{key} is missing"
            problem = args_problem(value, actual[key], f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where} is {shown(actual)}, expected {shown(expected)}"
        for index, (want, have) in enumerate(zip(expected, actual, strict=True)):
            problem = args_problem(want, have, f"{where}[{index}]")
            if problem:
                return problem
        return None
    if same(actual, expected) or (isinstance(expected, str) and _full_match(expected, actual)):
        return None
    return f"{where} is {shown(actual)}, expected {shown(expected)}"


def _full_match(pattern: str, actual: object) -> bool:
    text = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False, default=str)
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        # Not every string value is meant as a pattern; one that is not a valid one only matches equal.
        return False
