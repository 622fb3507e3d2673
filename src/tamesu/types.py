"""Types every user-written model shares: strict mappings, durations, `host:port` addresses; parsed JSON."""

from __future__ import annotations

import ipaddress
import json
import os.path
import re
from collections.abc import Callable
from typing import Annotated, Any, TypeAlias, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic import Strict as StrictMarker

_F = TypeVar("_F", bound=Callable[..., Any])
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


MAX_DURATION = 7 * 24 * 3600.0
"""A week: longer is a typo, and asyncio's timers overflow long before a number stops being one."""


def parse_duration(value: object) -> float:
    """`60s`, `500ms`, `2m`, or a number of seconds, as seconds (at most MAX_DURATION)."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s or 500ms")
    if isinstance(value, int | float):
        if value != value:
            raise ValueError("a duration is a number of seconds, not NaN")
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return _bounded(float(value) if abs(value) < 1e300 else float("inf"))
    if isinstance(value, str):
        match = _DURATION.match(value[:100])
        if match and len(value) <= 100:
            return _bounded(float(match.group(1)) * _UNIT_SECONDS[match.group(2)])
    raise ValueError(f"expected a duration such as 30s or 500ms, got {str(value)[:40]!r}")


def _bounded(seconds: float) -> float:
    if seconds > MAX_DURATION:
        raise ValueError(f"a duration of at most {MAX_DURATION / 3600:g}h (7 days) is allowed")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]

def narrows(function: _F) -> _F:
    """Mark a before-validator that only refuses values of its field's type (`true` for a count): the exported
    JSON Schema keeps the field's type, where an unmarked one is widened to what a shorthand may be."""
    function.__tamesu_narrows__ = True  # type: ignore[attr-defined]
    return function


_NUMERAL = re.compile(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*")


class FilledText(str):
    """Text a template put in as the plan was made (`lte: "{{vars.n}}"`, a CSV cell's `n`): a number field reads
    the number it spells, as the user wrote a template there, not a quoted number (a var is put in as text, and a
    CSV cell is text)."""

    __slots__ = ()


def _number_refused(value: object, expected: str) -> None:
    """Refuse what pydantic's lax mode read as a number: `true` as 1, the text `'4'` as 4 (and `'nan'` as NaN),
    where a quoted number is text the user wrote, most likely by mistake, and `true` is no count."""
    if isinstance(value, bool):
        raise ValueError(f"expected {expected}, not {str(value).lower()}")
    if isinstance(value, str):
        if _NUMERAL.fullmatch(value):
            if isinstance(value, FilledText):
                return  # pydantic's lax int or float reads it
            raise ValueError(f"{value[:40]!r} is text: write {value.strip()[:40]}")
        raise ValueError(f"expected {expected}, got {value[:40]!r}")


# a number as written goes on at once: planning a test reads several, and its Python calls are bounded
# (tests/engine/test_turn_calls.py)
@narrows
def _whole_number(value: object) -> object:
    if value.__class__ is not int:
        _number_refused(value, "a whole number")
    return value  # pydantic's int then: 4.0 is 4, 4.5 is refused


@narrows
def _a_number(value: object) -> object:
    if value.__class__ is not float and value.__class__ is not int:
        _number_refused(value, "a number")
    return value


YamlInt = Annotated[int, BeforeValidator(_whole_number)]
"""A whole number as YAML and JSON write one, `4`: the text `'4'` (`repeat: '4'`) is refused (`'4' is text: write
4`), and `true`, where pydantic's lax mode read either as a count. Every `int` a user writes is one (`tests/
test_strict_types.py` walks every `Strict` model)."""

YamlFloat = Annotated[float, BeforeValidator(_a_number)]
"""A number as YAML and JSON write one, `0.5` or `1`: the text `'0.5'` is refused as `YamlInt` says."""

NUMBER_READERS = (_whole_number, _a_number, parse_duration)
"""The before-validators that decide what a number field takes (a duration reads `30s`, and `'30'` as seconds,
on purpose): a number a user writes is read through one of them, never by pydantic's lax mode alone."""

Finite = Annotated[float, BeforeValidator(_a_number), Field(allow_inf_nan=False)]
"""A bound or a limit: `.nan` passes or fails every comparison and `.inf` holds for every number, so neither is one;
nor is `true`, which pydantic read as 1, nor the text `'0.5'`."""


def expand_home(path: str) -> str:
    """`~/x` and `~user/x` as the shell reads them: the home folder, never a folder named `~` in the project (a
    later `rm -rf ~/...` of it is the user's home). Other paths stay as written."""
    return os.path.expanduser(path) if path.startswith("~") else path


HomePath = Annotated[str, AfterValidator(expand_home)]
"""A path a user writes in tamesu.yaml; a leading `~` is the home folder."""

STORE_OFF_WORDS = frozenset({"", "off", "false", "no", "0", "none"})
STORE_ON_WORDS = frozenset({"on", "true", "yes", "1", "sqlite"})


def store_word_problem(text: str) -> str | None:
    """Why a results store setting is no store at all, or None. A bare word that is neither on nor off
    (`maybe`, `postgres`) would otherwise name a SQLite file of that name in the project's folder."""
    word = text.strip()
    if word.lower() in STORE_OFF_WORDS | STORE_ON_WORDS or not re.fullmatch(r"[A-Za-z][A-Za-z_-]*", word):
        return None
    return (f"'{word}' is no store: give true (SQLite in .tamesu/store.db), false (none), a SQLite file's path "
            "(such as history.db) or postgresql://...")


YamlBool = Annotated[bool, StrictMarker()]
"""A boolean as YAML 1.2 (and JSON) writes one, `true` or `false`: `yes`, `on`, `1` or `"true"` is refused
(`"yes" is not a boolean: write true or false`, `suite.problems`), where pydantic read them as true."""


def not_a_boolean(found: object) -> str:
    """The line of a value written where `true` or `false` is expected: text in double quotes, as JSON writes it
    (YAML 1.1's `yes` is text to YAML 1.2, which tamesu reads)."""
    written = json.dumps(found, ensure_ascii=False) if isinstance(found, str) else \
        "null" if found is None else repr(found)
    return f"{written} is not a boolean: write true or false"


BOOLEAN_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false"})
"""Text that is a boolean to YAML 1.1 (or one quoted): `true` or `false` meant, where a field takes text too."""


@narrows
def _no_boolean_word(value: object) -> object:
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS:
        raise ValueError(not_a_boolean(value))
    return value


TextOrBool = Annotated[str | YamlBool, BeforeValidator(_no_boolean_word)]
"""`true`, `false` or text (a test's `skip:` reason): text that YAML 1.1 read as a boolean, `skip: no`, is refused
as `YamlBool` refuses it, where it was the reason "no", and skipped the test."""


class Strict(BaseModel):
    """Every model a user writes rejects keys it does not know, so typos are caught. Its booleans are written
    `YamlBool` and its numbers `YamlInt`, `YamlFloat`, `Finite` or `Duration`, never a bare `bool`, `int` or
    `float`, which pydantic reads loosely (`yes` as true, `'4'` as 4): `tests/test_strict_types.py` walks every
    subclass for one."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


JSONValue: TypeAlias = str | int | float | bool | list["JSONValue"] | dict[str, "JSONValue"] | None
"""A parsed JSON document, as `json.loads` gives it: read it by narrowing (`isinstance(value, dict)`), never by
assuming its shape; what tamesu owns has a pydantic model or a TypedDict instead. For annotations only: a
pydantic field that holds any JSON is `JsonValue` (pydantic's), which this alias cannot stand in for."""

JSONObject: TypeAlias = dict[str, JSONValue]
"""A parsed JSON object."""


def json_object(value: object) -> JSONObject:
    """`value` when it is a JSON object, else an empty one: reading an optional object of a document tamesu
    wrote (or one an agent sent, already checked) without a branch at each step."""
    return value if isinstance(value, dict) else {}


def json_list(value: object) -> list[JSONValue]:
    """`value` when it is a JSON array, else an empty one (see `json_object`)."""
    return value if isinstance(value, list) else []


def whole_numbers(value: Any) -> Any:
    """JSON as it was written, from a protobuf Struct or Value, which carries every number as a double: `{"qty":
    2}` read back `{"qty": 2.0}`, and so it was shown to judges, captured and matched (an integral double below 2**53
    is the integer JSON wrote; JSON itself does not tell 2 from 2.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def split_addr(addr: str) -> tuple[str, int]:
    """`host:port` as a pair; an empty host means 127.0.0.1."""
    if "://" in addr or "/" in addr:
        # a URL (the OTLP endpoint an exporter is given) read as host `http://127.0.0.1` passed here and failed
        # only when the run listened on it
        scheme, _, rest = addr.partition("://")
        bare = (rest if rest else scheme).split("/", 1)[0]
        raise ValueError(f"expected host:port, got the URL {addr!r}: give host:port only"
                         + (f" ({bare!r})" if ":" in bare else ""))
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected host:port, got {addr!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def fixed_port(addr: str | None) -> int | None:
    """The port a checked `host:port` binds as written; None for no addr, or port 0 (a free one)."""
    if addr is None:
        return None
    port = split_addr(addr)[1]
    return port or None


def is_loopback(host: str) -> bool:
    """`localhost` (and names below it, RFC 6761), 127.0.0.0/8, ::1: this machine."""
    name = host.lower().strip("[]").rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _host_key(host: str) -> str:
    """A bind host as the machine sees it: its loopback names as one, every interface as `*`."""
    name = host.lower().strip("[]")
    if name in ("", "0.0.0.0", "::"):
        return "*"
    return "localhost" if is_loopback(name) else name


def binds_clash(first: str, second: str) -> bool:
    """Whether listeners bound at two checked `host:port`s could not both be: one port (not 0), and hosts that
    overlap: one spelt two ways (this machine's loopback names, `localhost`, 127.0.0.1, ::1, are one), or either
    0.0.0.0, which binds every address (a string compare missed `0.0.0.0:P` beside `127.0.0.1:P`)."""
    (host_a, port_a), (host_b, port_b) = split_addr(first), split_addr(second)
    if port_a != port_b or not port_a:
        return False
    key_a, key_b = _host_key(host_a), _host_key(host_b)
    return key_a == key_b or "*" in (key_a, key_b)


def _checked_addr(addr: str) -> str:
    split_addr(addr)
    return addr


HostPort = Annotated[str, AfterValidator(_checked_addr)]


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110's token: what an HTTP header's name may hold."""


def _header_name(name: str) -> str:
    # "x a" or "x: a" passed validate and every request of the run failed on it, as the HTTP library refused it
    if "{{" not in name and not _HEADER_NAME.fullmatch(name):
        written = json.dumps(name, ensure_ascii=False)  # double quotes, a line break as \n, as the path shows it
        raise ValueError(f"{written} is not an HTTP header name: letters, digits and !#$%&'*+-.^_`|~ only (no "
                         "space, colon or line break)")
    return name


def _header_value(value: str) -> str:
    if "\r" in value or "\n" in value or "\0" in value:
        raise ValueError("a header's value is one line: this one holds a line break (CR or LF) or a NUL")
    return value


HttpHeaders: TypeAlias = dict[Annotated[str, AfterValidator(_header_name)],
                              Annotated[str, AfterValidator(_header_value)]]
"""A mapping of HTTP headers as a user writes it: each name a token, each value one line (a name with a
template, `{{...}}`, is checked as it is sent)."""
"""A `host:port` a user writes (where tamesu listens); checked when the suite loads."""


def _a_store(value: str | bool | None) -> str | bool | None:
    problem = store_word_problem(value) if isinstance(value, str) else None
    if problem:
        raise ValueError(problem)
    return value


StoreSetting = Annotated[str | YamlBool | None, BeforeValidator(_no_boolean_word), AfterValidator(_a_store)]
"""tamesu.yaml's `store:`: true, false, a SQLite path or a URL; a bare word that is none of them is refused, and
so are `yes`, `on`, `off` (`TAMESU_STORE=off` takes them: an environment variable is text)."""
