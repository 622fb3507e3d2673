"""tamesu's own prompts, kept as versioned data files beside the code that uses them.

`prompts/<role>.v<N>.md` holds one role's prompt. A new wording is a new file (`judge.v2.md`), never an edit of
an old one, so the version recorded with every request and verdict names exactly the words a model saw, and a
change of verdicts can be traced to a change of prompt.

A file is split into named sections by lines such as `--- system ---`; text before the first marker is a
comment for maintainers and is never sent. Sections are `string.Template`s (`$name`, `${name}`), chosen
over `str.format` because prompts show JSON, whose braces would otherwise need escaping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from string import Template

_SECTION = re.compile(r"^--- ([a-z0-9 _-]+) ---[ \t]*$", re.MULTILINE)
_FILE = re.compile(r"^(?P<role>[a-z_]+)\.v(?P<number>\d+)\.md$")


@dataclass(frozen=True)
class Prompt:
    version: str
    """`judge.v1`: goes into every ModelRequest.prompt_version and every verdict."""
    text: str
    sections: dict[str, str] = field(default_factory=dict)

    def render(self, section: str, **values: object) -> str:
        """One section with its `$placeholders` filled; a missing value is a KeyError (a bug of ours)."""
        if section not in self.sections:
            raise KeyError(f"prompt {self.version} has no section {section!r}")
        text = self.sections[section]
        if not values:
            return _alone(text)
        return _template(text).substitute(values).strip()


@cache
def _template(text: str) -> Template:
    """A section's Template, made once (a simulated user's turn renders four)."""
    return Template(text)


@cache
def _alone(text: str) -> str:
    """A section rendered without values (`no_tool_results`, every turn of a simulated user), made once: one
    with a placeholder is a KeyError each time, as a failed call is not kept."""
    return _template(text).substitute().strip()


def _split(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    markers = list(_SECTION.finditer(text))
    for marker, following in zip(markers, [*markers[1:], None], strict=True):
        end = following.start() if following else len(text)
        sections[marker.group(1).strip()] = text[marker.end():end].strip("\n")
    return sections


@cache
def load(role: str, number: int | None = None, package: str = "tamesu.roles") -> Prompt:
    """The prompt of a role, its newest version unless `number` asks for one, from `package`'s `prompts/`."""
    folder = resources.files(package).joinpath("prompts")
    versions = {}
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match and match.group("role") == role:
            versions[int(match.group("number"))] = entry
    if not versions:
        raise LookupError(f"no prompt for {role!r}")
    chosen = number if number is not None else max(versions)
    if chosen not in versions:
        raise LookupError(f"no prompt {role}.v{chosen}")
    text = versions[chosen].read_text(encoding="utf-8")
    return Prompt(version=f"{role}.v{chosen}", text=text, sections=_split(text))
