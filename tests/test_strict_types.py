"""mypy's strict flags cover every package, so a new package cannot slip in loosely typed; and no model a user
writes reads a boolean or a number loosely."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src" / "tamesu"
LOOSE = {"audio", "_proto"}
"""numpy is read untyped (its arrays are Any, strict would only add casts); the stubs are generated."""


def _strict_modules() -> set[str]:
    config = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    overrides = config["tool"]["mypy"]["overrides"]
    strict = [o for o in overrides if o.get("disallow_any_generics") and o.get("disallow_untyped_defs")]
    assert len(strict) == 1, "one override holds the strict flags"
    return set(strict[0]["module"])


def test_every_package_and_root_module_is_checked_strictly() -> None:
    modules = _strict_modules()
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file() and p.name not in LOOSE)
    roots = sorted(p.stem for p in SRC.glob("*.py") if p.stem != "__init__")
    missing = [f"tamesu.{name}.*" for name in packages if f"tamesu.{name}.*" not in modules]
    missing += [f"tamesu.{stem}" for stem in roots if f"tamesu.{stem}" not in modules]
    if "tamesu" not in modules:
        missing.append("tamesu")
    assert not missing, f"add to pyproject's strict mypy override: {missing}"
    assert not [m for m in modules if m.split(".")[1:2] and m.split(".")[1] in LOOSE]


# What a user writes is read as written: `yes` is not true, `'4'` not 4 (tamesu.types: YamlBool, YamlInt,
# YamlFloat). pydantic reads a bare `bool`, `int` or `float` loosely, so none may be written in a user's model.
_SKIPPED = ("tamesu._proto", "tamesu.turn", "tamesu.__main__", "tamesu.store.migrations")


def _strict_models() -> list[type[Any]]:
    import tamesu
    from tamesu.types import Strict

    for info in pkgutil.walk_packages(tamesu.__path__, "tamesu."):
        if not info.name.startswith(_SKIPPED):
            with contextlib.suppress(ImportError):  # a module of an extra not installed here
                importlib.import_module(info.name)
    found: list[type[Any]] = []
    pending: list[type[Any]] = [Strict]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("tamesu.") and sub not in found:
                found.append(sub)
    return found


def _loose_fields(schema: object, owner: type[Any], field: str, parent: object, seen: set[int],
                  loose: set[tuple[str, str]]) -> None:
    """The fields of `owner` whose core schema holds a bool that is not strict, or an int or float not read
    through one of `NUMBER_READERS`; another model met inside is walked as its own owner."""
    from tamesu.types import NUMBER_READERS

    if isinstance(schema, list):
        for item in schema:
            _loose_fields(item, owner, field, None, seen, loose)
        return
    if not isinstance(schema, dict) or id(schema) in seen:
        return
    seen.add(id(schema))
    kind = schema.get("type")
    if kind == "model" and schema.get("cls") is not owner:
        return
    if kind == "model-fields":
        for name, inner in schema["fields"].items():
            _loose_fields(inner, owner, name, None, seen, loose)
        return
    read = isinstance(parent, dict) and parent.get("type") == "function-before" \
        and parent["function"]["function"] in NUMBER_READERS
    if (kind == "bool" and not schema.get("strict")) or (kind in ("int", "float") and not read):
        loose.add((field, str(kind)))
    for value in schema.values():
        _loose_fields(value, owner, field, schema, seen, loose)


def test_no_model_a_user_writes_reads_a_boolean_or_a_number_loosely() -> None:
    problems = []
    for model in _strict_models():
        model.model_rebuild()
        loose: set[tuple[str, str]] = set()
        _loose_fields(model.__pydantic_core_schema__, model, "", None, set(), loose)
        for field, kind in sorted(loose):
            # said once, by the class that writes the field
            home = next((c for c in model.__mro__ if field in inspect.get_annotations(c)), model)
            problems.append(f"{home.__module__}.{home.__qualname__}.{field}: a bare {kind}")
    wanted = {"bool": "YamlBool", "int": "YamlInt", "float": "YamlFloat (or Finite, Duration)"}
    assert not problems, "write " + ", ".join(f"{k} as {v}" for k, v in wanted.items()) + ":\n" + \
        "\n".join(sorted(set(problems)))
