"""mypy's strict flags cover every package, so a new package cannot slip in loosely typed."""

from __future__ import annotations

import tomllib
from pathlib import Path

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
