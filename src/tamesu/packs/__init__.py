"""Packs: named, reusable sets of assertions, used as `pack: NAME` under `assert:` (or `defaults.assert`).

A built-in pack is a YAML file beside this module, named after the pack: a header comment saying what it
checks and why, `description` (one sentence) and `assert` (assertions as a suite writes them, each with a
`name` that reports use). Deterministic checks come first; a judge is there only for what a pattern cannot
decide, and needs `models.judge` (or the pack's `model:`). A pack never contains a pack.

A red-team pack may also have an `attack:` section (`AttackSpec`: the attacker's goal, style, tactics and
opening lines). A test that names it as `scenario.attack` lets the simulator play that attacker and is graded
by the pack as well (see `attack_of`).

A suite or `tamesu.yaml` declares its own under `packs:`, in the same shape; a suite's pack replaces the
project's of the same name, and either replaces a built-in one.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

from pydantic import Field, field_validator
from ruamel.yaml import YAML

from tamesu.types import Strict

__all__ = ["JUDGED_KEYS", "AttackSpec", "PackSpec", "attack_names", "attack_of", "builtin", "builtin_names",
           "inline", "name_of", "needs_judge", "resolve"]

JUDGED_KEYS = frozenset({"judge", "grounded"})
"""Assertion kinds that ask a model; `pack: {judges: false}` leaves them out."""


class AttackSpec(Strict):
    """`attack:` in a pack: how the simulated user attacks when a test says `scenario.attack: NAME`."""

    goal: str = Field(min_length=1)
    """What the attacker wants the agent to do; the test's own `scenario.goal` becomes its cover story."""
    style: str | None = None
    """How the attacker talks; added to the persona's own style."""
    tactics: list[str] = Field(default_factory=list)
    """Ways to try, for the simulator model to pick from and escalate with."""
    openings: list[str] = Field(min_length=1)
    """Opening lines; a model adapts them, the fake simulator says them in order, one per turn."""


class PackSpec(Strict):
    description: str = Field(min_length=1)
    """What the pack checks, in one sentence."""
    assert_: list[dict[str, Any]] = Field(alias="assert", min_length=1)
    attack: AttackSpec | None = None
    """How a simulated user attacks the agent for this pack (`scenario.attack: NAME`); red-team packs only."""

    @field_validator("assert_")
    @classmethod
    def _no_nested_packs(cls, entries: list[dict[str, Any]]) -> list[dict[str, object]]:
        if any("pack" in entry for entry in entries):
            raise ValueError("a pack cannot contain a pack; list the assertions themselves")
        return entries


def builtin_names() -> list[str]:
    return sorted(entry.name.removesuffix(".yaml") for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith(".yaml"))


@functools.cache
def builtin(name: str) -> PackSpec | None:
    """A built-in pack, read once per process; None when there is none of that name."""
    if name not in builtin_names():
        return None
    text = resources.files(__name__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    return PackSpec.model_validate(YAML(typ="safe").load(text))


def resolve(name: str, user: Mapping[str, PackSpec] | None = None) -> PackSpec:
    """The pack a suite means by `name`: its own first, then the built-in one. Raises ValueError."""
    if user and name in user:
        return user[name]
    found = builtin(name)
    if found is None:
        own = f"; the suite's: {', '.join(sorted(user))}" if user else ""
        close = difflib.get_close_matches(name, [*(user or ()), *builtin_names()], n=1)
        meant = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"no pack named {name!r} ({meant}built-in: {', '.join(builtin_names())}{own}; declare "
                         "your own under packs:)")
    return found


def attack_names(user: Mapping[str, PackSpec] | None = None) -> list[str]:
    """The packs that can attack: the built-in ones with an `attack:` section, and the suite's own."""
    found = {name for name in builtin_names() if (pack := builtin(name)) and pack.attack}
    for name, pack in (user or {}).items():
        (found.add if pack.attack else found.discard)(name)
    return sorted(found)


def attack_of(name: str, user: Mapping[str, PackSpec] | None = None) -> AttackSpec:
    """The attack of the pack a suite means by `name` (`scenario.attack`). Raises ValueError."""
    try:
        pack = resolve(name, user)
    except ValueError:
        pack = None
    if pack is None or pack.attack is None:
        what = f"no attack named {name!r}" if pack is None else f"pack {name!r} grades but does not attack"
        raise ValueError(f"{what} (attacks: {', '.join(attack_names(user)) or 'none'}; a pack of your own "
                         "attacks with an attack: section)")
    return pack.attack


def name_of(entry: Any) -> str | None:
    """The pack an assertion entry names, or None when it is not a `pack:` entry."""
    if not isinstance(entry, Mapping) or "pack" not in entry:
        return None
    value = entry["pack"]
    if isinstance(value, str):
        return value
    return value.get("name") if isinstance(value, Mapping) else None


def inline(entry: Any, user: Mapping[str, PackSpec]) -> Any:
    """`{pack: NAME}` where NAME is a pack of the suite or project, with that pack's definition written in,
    so the `pack` check needs no registry of user packs. Any other entry is returned as it is."""
    name = name_of(entry)
    if name is None or name not in user:
        return entry
    value = entry["pack"]
    ref = {"name": value} if isinstance(value, str) else dict(value)
    pack = user[name]
    return {**entry, "pack": {**ref, "description": pack.description, "assert": pack.assert_}}


def needs_judge(entry: Any, user: Mapping[str, PackSpec] | None = None) -> bool:
    """Whether a `pack:` entry will ask the judge model (so `validate` can require models.judge)."""
    name = name_of(entry)
    if name is None:
        return False
    options = entry["pack"] if isinstance(entry["pack"], Mapping) else {}
    if ("judges" in options and not options["judges"]) or options.get("model") is not None:
        return False
    try:
        pack = resolve(name, user)
    except ValueError:
        return False
    return any(key in JUDGED_KEYS and not (isinstance(opts, Mapping) and opts.get("model"))
               for item in pack.assert_ for key, opts in item.items())
