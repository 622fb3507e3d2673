"""Running tamesu as on a machine without an extra: a folder whose `sitecustomize.py` makes some modules
unfindable in every Python process that has the folder on its PYTHONPATH (the extras are installed here)."""

from __future__ import annotations

from pathlib import Path


def hiding(parent: Path, *modules: str) -> Path:
    """A new folder `hide` in `parent` that hides `modules` and everything beneath them (`opentelemetry.sdk`
    hides `opentelemetry.sdk.trace` but not `opentelemetry.proto`); put it first on the child's PYTHONPATH."""
    folder = parent / "hide"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        f"HIDDEN = {tuple(modules)!r}\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if any(name == hidden or name.startswith(hidden + '.') for hidden in HIDDEN):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Hide())\n", encoding="utf-8")
    return folder
