"""Each `targets:` entry validated by its type's own spec model; a key of another type is a warning."""

from __future__ import annotations

from pydantic import ValidationError

from tamesu import plugins, targets
from tamesu.errors import ConfigError, Problem
from tamesu.plan.model import Project
from tamesu.suite.problems import problems_from
from tamesu.suite.schema import ProjectSpec, SuiteSpec
from tamesu.suite.yaml_reader import Document
from tamesu.targets.base import TargetSpec


def load_project_targets(project: Project) -> tuple[dict[str, TargetSpec], list[Problem]]:
    """The `targets:` of tamesu.yaml (for `tamesu test -n NAME`), validated by their types; raises ConfigError.
    Returns the targets and the warnings (a key of another target type)."""
    if project.doc is None or not project.spec.targets:
        return {}, []
    problems: list[Problem] = []
    warnings: list[Problem] = []
    loaded = load_targets(project.spec, project.doc, problems, warnings)
    if problems:
        raise ConfigError(problems)
    return loaded, warnings


def load_targets(
    spec: SuiteSpec | ProjectSpec, doc: Document, problems: list[Problem], warnings: list[Problem]
) -> dict[str, TargetSpec]:
    loaded: dict[str, TargetSpec] = {}
    for name, raw in spec.targets.items():
        loc = ("targets", name)
        kind = raw.get("type")
        if kind is None:
            problems.append(doc.problem(loc, "missing required key 'type' (one of "
                                        f"{', '.join(targets.known_types())})"))
            continue
        if not isinstance(kind, str):
            written = "list" if isinstance(kind, list) else "mapping" if isinstance(kind, dict) else type(kind).__name__
            problems.append(doc.problem((*loc, "type"), f"type must be one word naming a target type (one of "
                                        f"{', '.join(targets.known_types())}), not a {written}"))
            continue
        if not targets.is_known(kind):
            problems.append(doc.problem((*loc, "type"), f"unknown target type {kind!r} (one of "
                                        f"{', '.join(targets.known_types())})"))
            continue
        if not targets.is_implemented(kind):
            problems.append(doc.problem((*loc, "type"),
                                        f"target type {kind!r} is not available in this version of tamesu"))
            continue
        try:
            cls = targets.target_class(kind)
        except plugins.PluginError as exc:
            problems.append(doc.problem((*loc, "type"), str(exc)))
            continue
        missing = cls.unavailable()
        if missing:
            problems.append(doc.problem((*loc, "type"), missing))
            continue
        own_keys = targets.keys_of(kind)
        kept = dict(raw)
        for key in raw:
            owner = targets.foreign_key_owner(kind, key)
            if key not in own_keys and owner is not None:
                warnings.append(doc.problem((*loc, key), f"{key!r} is a key of {owner} targets, "
                                            f"not {kind}; ignored", key=True))
                kept.pop(key)
        try:
            loaded[name] = cls.Spec.model_validate(kept)
        except ValidationError as exc:
            problems.extend(problems_from(exc, doc, cls.Spec, loc, owner=f"{kind} target"))
    return loaded
