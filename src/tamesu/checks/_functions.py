"""Finding a Python function a suite or a JSONL file names: `module:function` (or `scripts:module:function`),
where the module is a file under one of the search folders (`a.b` is `a/b.py`), else (unless the caller allows
only the project's own files) an importable module."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_LOADED: dict[Path, Any] = {}


def load_function(reference: str, search: list[Path], *, project_only: bool = False) -> Callable[..., Any]:
    """The function `reference` names. Raises ValueError saying what is missing."""
    body = reference.removeprefix("scripts:")
    module_name, _, function_name = body.rpartition(":")
    if not module_name or not function_name:
        raise ValueError(f"expected module:function, got {reference!r}")
    module = _module(module_name, search, project_only)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{module_name} has no function {function_name!r}")
    return function


def _module(name: str, search: list[Path], project_only: bool) -> Any:
    relative = Path(*name.split("."))
    for folder in search:
        path = (folder / relative).with_suffix(".py")
        if path.is_file():
            return _from_file(path.resolve())
    where = ", ".join(str(folder) for folder in search)
    if project_only:
        # a custom check is code of the project: an installed module or the standard library is not one
        raise ValueError(f"no module {name!r} in the project (looked for {relative}.py in {where})")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ValueError(f"no module {name!r} (looked for {relative}.py in {where}, then on the Python path: "
                         f"{exc})") from None


def _from_file(path: Path) -> Any:
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
