"""What the documentation site generates from the code at build time, so the pages cannot drift from it.

- `key_table(kind)`: every key of a target type, from its pydantic `Spec` (nested mappings as dotted keys),
  with its type, its default and the field's docstring;
- `cli_reference()`: every click command of `tamesu` with its usage, help and options;
- `schema_keys(kind)` and `schemas()`: the JSON Schemas `tamesu schema` exports, summarised and whole.

`scripts/mkdocs_hooks.py` puts them into the pages; `python scripts/docs_gen.py keys rest` prints one.
"""

from __future__ import annotations

import ast
import datetime
import inspect
import json
import sys
import textwrap
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tamesu import targets
from tamesu.types import parse_duration

_MAX_DEPTH = 3


@cache
def _attribute_docs(model: type) -> dict[str, str]:
    """The docstrings written under a model's fields (`x: int = 1` then `\"\"\"...\"\"\"`), its bases' too:
    pydantic keeps them only with `use_attribute_docstrings`, which would read every model's source at import."""
    docs: dict[str, str] = {}
    for klass in reversed(model.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, [*body[1:], None], strict=True):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """The type beneath `Annotated[...]` and its metadata."""
    metadata: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *more = typing.get_args(annotation)
        metadata.extend(more)
    return annotation, metadata


def _is_duration(metadata: list[Any]) -> bool:
    return any(getattr(m, "func", None) is parse_duration for m in metadata)


def _type_name(annotation: Any, metadata: list[Any] | None = None) -> str:
    annotation, inner = _unwrap(annotation)
    metadata = [*(metadata or []), *inner]
    if _is_duration(metadata):
        return "duration"
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " | ".join(dict.fromkeys(names))
    if origin is typing.Literal:
        return " | ".join(f"`{v}`" for v in typing.get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    if annotation is typing.Any or annotation is object:
        return "any"
    named = {str: "string", int: "integer", float: "number", bool: "boolean", datetime.date: "date (YYYY-MM-DD)"}
    return named.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field holds (directly, optionally, or in a union), for its nested rows."""
    annotation, _ = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _models_in(a)]
    return []


def _items_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a list field holds (`tools: [{name, ...}]`), for its `key[].` rows."""
    annotation, _ = _unwrap(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _items_in(a)]
    if typing.get_origin(annotation) is list:
        return [m for a in typing.get_args(annotation) for m in _models_in(a)]
    return []


def _format_seconds(seconds: float) -> str:
    if seconds and seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "see below"
    if value is None:
        return "none"
    if value in ({}, [], ()):
        return "empty"
    _, metadata = _unwrap(field.annotation)
    if _is_duration([*field.metadata, *metadata]) and isinstance(value, int | float):
        return f"`{_format_seconds(float(value))}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list | str):
        return f"`{json.dumps(value)}`" if value == "" or not isinstance(value, str) else f"`{value}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(model: type[BaseModel], prefix: str, depth: int) -> Iterator[tuple[str, str, str, str]]:
    docs = _attribute_docs(model)
    for name, field in model.model_fields.items():
        key = field.alias or name
        if prefix == "" and key == "type":
            continue
        meaning = field.description or docs.get(name, "")
        yield (f"{prefix}{key}", _type_name(field.annotation, list(field.metadata)), _default(field), meaning)
        if depth < _MAX_DEPTH:
            for nested in dict.fromkeys(_models_in(field.annotation)):
                yield from _rows(nested, f"{prefix}{key}.", depth + 1)
            for item in dict.fromkeys(_items_in(field.annotation)):
                yield from _rows(item, f"{prefix}{key}[].", depth + 1)


def key_table(kind: str) -> str:
    """A markdown table of every key a target of `kind` takes."""
    spec = targets.target_class(kind).Spec
    lines = [f"Every key of `type: {kind}`, read from its model (`{spec.__module__}.{spec.__name__}`):", "",
             "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, type_name, default, meaning in _rows(spec, "", 1):
        lines.append(f"| `{key}` | {_cell(type_name)} | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


def model_table(path: str) -> str:
    """A markdown table of every key of a user-written model named `module:Class` (a persona, a model)."""
    import importlib

    module, _, name = path.partition(":")
    model = getattr(importlib.import_module(module), name)
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, type_name, default, meaning in _rows(model, "", 1):
        lines.append(f"| `{key}` | {_cell(type_name)} | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


def _option_row(param: click.Parameter) -> str:
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    if isinstance(param, click.Option) and isinstance(param.type, click.Choice):
        names += " " + "|".join(str(c) for c in param.type.choices)
    elif isinstance(param, click.Option) and not param.is_flag and not param.count:
        names += f" {param.metavar or param.type.name.upper().replace(' RANGE', '')}"
    help_text = getattr(param, "help", None) or ""
    default = ""
    if isinstance(param, click.Option) and param.show_default and param.default not in (None, False, ()):
        default = f"`{param.default}`"
    return f"| {_cell(names)} | {_cell(help_text)} | {default} |"


def _command_section(name: str, command: click.Command, parent: click.Context) -> Iterator[str]:
    ctx = click.Context(command, info_name=name, parent=parent)
    yield f"## `{ctx.command_path}`"
    yield ""
    yield f"```text\n{ctx.command_path} {' '.join(command.collect_usage_pieces(ctx))}\n```"
    yield ""
    if command.help:
        yield inspect.cleandoc(command.help).split("\f")[0].strip()
        yield ""
    options = [p for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    if options:
        yield "| option | what it does | default |"
        yield "| --- | --- | --- |"
        yield from (_option_row(p) for p in options)
        yield ""
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            found = command.get_command(ctx, sub)
            if found is not None and not found.hidden:
                yield from _command_section(sub, found, ctx)


def cli_reference() -> str:
    """Every command of `tamesu`, from the click objects `tamesu` itself runs."""
    from tamesu.cli.main import main

    root = click.Context(main, info_name="tamesu")
    lines: list[str] = []
    for name in main.list_commands(root):
        command = main.get_command(root, name)
        if command is not None and not command.hidden:
            lines.extend(_command_section(name, command, root))
    return "\n".join(lines) + "\n"


def schemas() -> dict[str, dict[str, Any]]:
    from tamesu.cli.schema_export import schemas as exported

    return exported()


def schema_keys(kind: str) -> str:
    """The top-level keys of a suite (or of tamesu.yaml), from the model the loader validates them with."""
    from tamesu.suite.schema import ProjectSpec, SuiteSpec

    model = {"suite": SuiteSpec, "project": ProjectSpec}[kind]
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, type_name, default, meaning in _rows(model, "", _MAX_DEPTH):
        lines.append(f"| `{key}` | {_cell(type_name)} | {_cell(default)} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    what, *rest = sys.argv[1:] or ["keys", "rest"]
    print({"keys": lambda: key_table(rest[0]), "cli": cli_reference,
           "schema": lambda: schema_keys(rest[0] if rest else "suite")}[what]())
