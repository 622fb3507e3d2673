"""Finding a Python function a suite or a JSONL file names: `module:function` (or `scripts:module:function`),
where the module is a file under one of the search folders (`a.b` is `a/b.py`), else (unless the caller allows
only the project's own files) an importable module; or the design's script id (`scripts:a.b-c`)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

_LOADED: dict[Path, object] = {}

Role = Literal["validate", "generate", "simulate"]
"""The function a script id calls by convention: an assertion's `validate`, a generator's `generate`, a
simulator's `simulate`."""


def load_function(reference: str, search: list[Path], role: Role = "validate", *,
                  project_only: bool = False) -> Callable[..., Any]:
    """The function a script reference names; raises ValueError saying what is missing. Two forms:

    - `scripts:module:function` (or `module:function`): the module is a file under one of the `search`
      folders (`a.b` is `a/b.py` or `a/b/__init__.py`), never an installed or standard-library module;
    - `scripts:a.b-c` (the design's script id, no second colon): the file `scripts/a/b-c.py` under one of the
      `search` folders (hyphens allowed), and its function named after the role (`validate`, `generate`,
      `simulate`); failing that, `scripts/a.py` with a function named `b-c`'s last segment (so
      `scripts:tests.expense.generate` may also be `generate` in `scripts/tests/expense.py`)."""
    body = reference.removeprefix("scripts:")
    if ":" not in body and not project_only:
        return _script_id(body, search, role)
    module_name, _, function_name = body.rpartition(":")
    if not module_name or not function_name:
        expected = "module:function" if project_only else f"scripts:module:function or a script id " \
            f"(scripts:tests.{role})"
        raise ValueError(f"expected {expected}, got {reference!r}")
    module = _module(module_name, search)
    function: object = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{module_name} has no function {function_name!r}")
    return function


def _script_id(name: str, search: list[Path], role: Role) -> Callable[..., Any]:
    segments = name.split(".")
    if not name or not all(segments) or any("/" in s or "\\" in s for s in segments):
        raise ValueError(f"expected a script id such as scripts:tests.{role} (a file under scripts/), got "
                         f"{'scripts:' + name!r}")
    folders = list(dict.fromkeys(folder / "scripts" for folder in search))
    for folder in folders:
        path = folder.joinpath(*segments).with_suffix(".py")
        if path.is_file():
            function: object = getattr(_from_file(path.resolve()), role, None)
            if not callable(function):
                raise ValueError(f"{path} has no function {role!r} (a script id calls {role}())")
            return function
    if len(segments) > 1 and segments[-1].isidentifier():
        for folder in folders:
            path = folder.joinpath(*segments[:-1]).with_suffix(".py")
            if path.is_file():
                named: object = getattr(_from_file(path.resolve()), segments[-1], None)
                if callable(named):
                    return named
    where = ", ".join(str(folder.joinpath(*segments).with_suffix(".py")) for folder in folders)
    raise ValueError(f"no script {name!r}: looked for {where}")


def _module(name: str, search: list[Path]) -> object:
    """Only the project's own modules: a file under one of the `search` folders. A name that would import a
    standard-library or installed module (`os:system`, `subprocess:run`) is refused, never imported."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        raise ValueError(f"{name!r} is not a module name")
    relative = Path(*parts)
    for folder in search:
        for path in ((folder / relative).with_suffix(".py"), folder / relative / "__init__.py"):
            if path.is_file() and _inside(path.resolve(), folder):
                return _from_file(path.resolve())
    where = ", ".join(str(folder) for folder in search)
    installed = importlib.util.find_spec(parts[0]) is not None if parts[0] not in sys.modules else True
    why = f"{parts[0]!r} is a standard-library or installed module, and scripts: runs only the project's own" \
        if installed else "no such file"
    raise ValueError(f"no module {name!r} in the project (looked for {relative}.py in {where}): {why}")


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder.resolve())
    except (ValueError, OSError):
        return False
    return True


def _from_file(path: Path) -> object:
    # loaded once per process under a private name, so two folders with a `checks.py` do not collide
    if path not in _LOADED:
        unique = f"tamesu_script_{len(_LOADED)}_{path.stem}"
        spec = importlib.util.spec_from_file_location(unique, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"{path} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[unique] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(unique, None)
            raise ValueError(f"{path.name} raised {type(exc).__name__} on import: {exc}") from None
        _LOADED[path] = module
    return _LOADED[path]


def check_callable(function: Callable[..., Any], given: str, args: int, kwargs: Mapping[str, object]) -> None:
    """Raises ValueError when `function` cannot be called with `args` positional arguments and `kwargs` (its
    parameters read, nothing called), so a suite whose `with:` does not fit its function is refused where
    written instead of failing every run of it. `given` says what it is called with, for the message."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # no readable signature (a C function): what it takes is found out when it is called
    try:
        signature.bind(*([None] * args), **kwargs)
    except TypeError as exc:
        plain = signature.replace(
            parameters=[p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()],
            return_annotation=inspect.Signature.empty)
        name = getattr(function, "__name__", "the function")
        raise ValueError(f"{name}{plain} cannot be called with {given}: {exc}") from None
