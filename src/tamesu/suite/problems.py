"""Pydantic validation errors turned into `file:line:col: path: problem` lines."""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from tamesu.errors import Problem, article
from tamesu.suite.yaml_reader import Document
from tamesu.types import not_a_boolean

_OWNER_NAMES = {
    "tests": "test",
    "cases": "case",
    "script": "script step",
    "capture": "capture",
    "files": "file",
    "before_all": "hook",
    "after_all": "hook",
    "before_each": "hook",
    "after_each": "hook",
    "behaviors": "behaviors",
    "defaults": "defaults",
}


def _unwrap(annotation: object) -> list[Any]:
    """The model classes an annotation may hold (inside Optional, list, dict, Annotated, unions)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, set):
        return [m for arg in typing.get_args(annotation) for m in _unwrap(arg)]
    if origin is dict:
        args = typing.get_args(annotation)
        return _unwrap(args[1]) if len(args) == 2 else []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _field(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    return None


def model_at(model: type[BaseModel], loc: Sequence[object]) -> type[BaseModel] | None:
    """The model that owns the mapping at `loc`, following field annotations."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        info = _field(current, str(part))
        if info is None:
            # a dict key (a target's name...) keeps the value model of the dict
            continue
        candidates = _unwrap(info.annotation)
        current = candidates[0] if candidates else None
    return current


def keys_of(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _listed_keys(model: type[BaseModel]) -> list[str]:
    """The keys as a hint lists them: a field written by its own name as well as by its alias (JSONL's
    `assertions`, documented, and `assert`) is listed by both, its name first."""
    by_name = model.model_config.get("populate_by_name") or model.model_config.get("validate_by_name")
    return [f"{name} (or {info.alias})" if by_name and info.alias and info.alias != name and not name.endswith("_")
            else info.alias or name for name, info in model.model_fields.items()]


_NAMED_ENTRIES = {"models": "model", "targets": "target", "remote_agents": "remote agent"}
"""Maps whose keys are names the user chose: `models.other.temprature` is not a *model* key, not an "other" one."""


def owner_name(loc: Sequence[object], default: str) -> str:
    for index in range(len(loc) - 1, -1, -1):
        part = loc[index]
        if isinstance(part, str):
            if index > 0 and loc[index - 1] in _NAMED_ENTRIES and len(loc) == index + 1:
                return _NAMED_ENTRIES[str(loc[index - 1])]
            return _OWNER_NAMES.get(part, part)
    return default


_READ_AS = " (read as {}: put it in quotes to keep it as written)"


def _message(error: Mapping[str, object], model: type[BaseModel], loc: tuple[object, ...], default_owner: str) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = loc[:-1]
        owner = owner_name(parent, default_owner)
        owner_model = model_at(model, parent)
        hint = ""
        field = owner_model.model_fields.get(str(loc[-1])) if owner_model is not None else None
        if field is not None and field.alias and field.alias != loc[-1]:
            # pydantic took the alias and refused the name: both were written (`assert` and `assertions`)
            return f"{loc[-1]} and {field.alias} are the same key: write one"
        if owner_model is not None:
            # by its name too: `assertions` is a key (populate_by_name) though the key list shows `assert`
            written = {*keys_of(owner_model), *owner_model.model_fields}
            close = difflib.get_close_matches(str(loc[-1]), sorted(written), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (keys: {', '.join(_listed_keys(owner_model))})"
        return f"not {article(owner)} key{hint}"
    if kind == "missing":
        return "missing required key"
    if kind == "bool_type" and "input" in error:  # `yes`, `on`, 1: YAML 1.1's, or a quoted "true"
        return not_a_boolean(error["input"])
    message = str(error["msg"])
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    message = message[:1].lower() + message[1:]
    if kind in ("model_type", "model_attributes_type"):  # pydantic names the class ("instance of Persona")
        message = "expected a mapping of keys"
    if kind not in ("value_error", "assertion_error") and "input" in error:
        found = error["input"]
        if not isinstance(found, dict | list):
            # pydantic may say what it got in words already ("got a number with a fractional part")
            message += f" ({as_written(found)})" if ", got " in message else f", got {as_written(found)}"
        if kind == "literal_error" and isinstance(found, str):
            ctx = error.get("ctx")
            expected = ctx.get("expected", "") if isinstance(ctx, dict) else ""
            close = difflib.get_close_matches(found, re.findall(r"'([^']*)'", str(expected)), n=1)
            if close:
                message += f" (did you mean {close[0]!r}?)"
        if kind == "string_type" and isinstance(found, bool | int | float):
            # `say: 1.10` is the number 1.1 to YAML, `say: true` a boolean: the words as written are lost
            message += _READ_AS.format("a boolean" if isinstance(found, bool) else "a number")
    return message


def problems_from(
    exc: ValidationError,
    doc: Document,
    model: type[BaseModel],
    prefix: tuple[object, ...] = (),
    owner: str = "",
) -> list[Problem]:
    return [doc.problem((*prefix, *where), message, key=at_key)
            for where, message, at_key in said_of(exc, model, owner or model.__name__.lower())]


def said_of(exc: ValidationError, model: type[BaseModel], owner: str) -> list[tuple[tuple[object, ...], str, bool]]:
    """Each problem of `exc` as (the path written, the words, whether it is said at the key): what
    `problems_from` places in a document, and an assertion's options (`checks._parse`) say the same way."""
    grouped: dict[tuple[object, ...], list[tuple[dict[str, Any], str | None]]] = {}
    for error in _mapping_meant_for_a_model(exc.errors()):
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        # model validators put their errors on the model itself; pydantic may tack on the union member name
        member = next((str(p) for p in reversed(loc) if p in _MEMBERS), None)
        loc = tuple(p for p in loc if p not in _MEMBERS)
        grouped.setdefault(loc, []).append((dict(error), member))
    said: list[tuple[tuple[object, ...], str, bool]] = []
    for where, errors in grouped.items():
        members = [member for _, member in errors if member is not None]
        if _list_meant_for_a_list(where, errors, grouped):
            continue
        if len(members) > 1 and len(members) == len(errors):
            # one value each member of a union refused (`skip: 5`): one line, not one per member
            said.append((where, _union_message(errors[0][0].get("input"), members), False))
            continue
        # a mapping's key refused (an HTTP header's name): pydantic ends the path `[key]`; said at the key
        named = bool(where) and where[-1] == "[key]"
        at = where[:-1] if named else where
        for detail, _ in errors:
            message = _message(detail, model, at, owner)
            said.append((at, message, named or detail["type"] == "extra_forbidden"))
    return said


def _list_meant_for_a_list(where: tuple[object, ...], errors: list[tuple[dict[str, Any], str | None]],
                           grouped: Mapping[tuple[object, ...], object]) -> bool:
    """A list written where `str | list[str]` is expected (`not_contains: [1, 2]`) was meant for the list member:
    the text member's "should be a valid string" of the whole list is noise beside the items' own problems."""
    return (all(member is not None and isinstance(error.get("input"), list) and str(error["type"]).endswith("_type")
                for error, member in errors)
            and any(len(other) > len(where) and other[:len(where)] == where for other in grouped))


def _model_names() -> set[str]:
    names: set[str] = set()
    pending: list[type[BaseModel]] = [BaseModel]
    while pending:
        for sub in pending.pop().__subclasses__():
            names.add(sub.__name__)
            pending.append(sub)
    return names


def _member_tag(part: object, models: set[str]) -> bool:
    """Whether a loc part is the tag pydantic gives a model member of a union: its class name, or the
    validator chain wrapped around it (`function-after[..., ModelSpec]`)."""
    return isinstance(part, str) and (part in models or part.startswith("function-"))


def _mapping_meant_for_a_model(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A mapping written where `bool | PushSpec` (`str | RoleSelector`...) is expected can only have been meant
    for the model: the scalar members' "should be a valid boolean" is noise, and the model's class name in the
    path (`push.PushSpec.url`) is a name the user never wrote. Only the model's errors stay, at the path written."""
    models = _model_names()
    # `push: 5`: the model member's "valid dictionary or instance of PushSpec" is one member of the union message
    errors = [{**e, "loc": (*e["loc"][:-1], _MAPPING)} if e["type"] in _NOT_A_MAPPING and len(e["loc"]) > 0
              and _member_tag(e["loc"][-1], models) else e for e in errors]
    refused_kind = {tuple(e["loc"][:-1]) for e in errors
                    if len(e["loc"]) > 0 and e["loc"][-1] in _MEMBERS and isinstance(e.get("input"), dict)
                    and str(e["type"]).endswith("_type")}
    if not refused_kind:
        return [dict(e) for e in errors]
    kept: list[dict[str, Any]] = []
    for error in errors:
        loc = tuple(error["loc"])
        at = next((where for where in refused_kind
                   if loc[:len(where)] == where and len(loc) > len(where)
                   and any(tuple(other["loc"][:len(where)]) == where
                           and len(other["loc"]) > len(where) and _member_tag(other["loc"][len(where)], models)
                           for other in errors)), None)
        if at is None:
            kept.append(dict(error))
        elif loc[len(at)] in _MEMBERS and len(loc) == len(at) + 1:
            continue
        elif _member_tag(loc[len(at)], models):
            kept.append({**error, "loc": (*at, *loc[len(at) + 1:])})
        else:
            kept.append(dict(error))
    return kept


def as_written(found: object) -> str:
    """A value a user wrote, as YAML and JSON spell it (`true`, `null`, not Python's `True`, `None`); text and
    numbers as before."""
    if found is None:
        return "null"
    if isinstance(found, bool):
        return "true" if found else "false"
    return repr(found)


_MAPPING = "{...}"
_NOT_A_MAPPING = {"model_type", "model_attributes_type", "dict_type"}
_MEMBERS = {"str": "text", "int": "a whole number", "float": "a number", "bool": "a boolean (true, false)",
            "list[int]": "a list of whole numbers", "list[str]": "a list of texts", _MAPPING: "a mapping of keys"}


def _union_message(found: object, members: list[str]) -> str:
    said = [_MEMBERS[member] for member in dict.fromkeys(members)]
    message = f"expected {', '.join(said[:-1])} or {said[-1]}, got {as_written(found)}"
    if "str" in members and isinstance(found, bool | int | float):
        message += _READ_AS.format("a boolean" if isinstance(found, bool) else "a number")
    return message
