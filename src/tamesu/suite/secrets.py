"""Secrets come from the environment and `.env` files; their values never leave the process."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tamesu.errors import TemplateError

MASK = "***"
# A value shorter than this would mask ordinary words everywhere; such a secret is not worth hiding by text.
_MIN_REDACTED_LENGTH = 3
_MAX_DOTENV_BYTES = 1_000_000


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=value lines; `export`, quotes and comments as shells write them."""
    from tamesu.suite._yaml import read_bounded

    values: dict[str, str] = {}
    try:
        if not path.is_file():
            return values
    except (OSError, ValueError):  # a name longer than the system allows: no such file
        return values
    # not UTF-8, NUL bytes or megabytes of garbage: one `file:line:col` problem (ConfigError), never a crash
    for raw in read_bounded(path, str(path), limit=_MAX_DOTENV_BYTES).splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        if not sep:
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = re.sub(r"\s+#.*$", "", value)
        values[key.strip()] = value
    return values


class Secrets:
    """Looks secrets up (environment first, then `.env` files) and remembers every value it gave out."""

    def __init__(self, env_files: Iterable[Path] = (), environ: Mapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._files: dict[str, str] = {}
        for path in env_files:
            for key, value in read_dotenv(path).items():
                self._files.setdefault(key, value)
        self.redactor = Redactor()

    def has(self, name: str) -> bool:
        return name in self._environ or name in self._files

    def __call__(self, name: str) -> str:
        if name in self._environ:
            value = self._environ[name]
        elif name in self._files:
            value = self._files[name]
        else:
            raise TemplateError(f"secret {name} is not set (environment or .env)")
        self.redactor.add(value)
        return value


class Redactor:
    """Masks every secret value in text and in JSON-like data before it is written or printed."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, value: str) -> None:
        if len(value) >= _MIN_REDACTED_LENGTH and value not in self._values:
            self._values.add(value)
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def data(self, value: Any) -> Any:
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)) if isinstance(k, str) else k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value
