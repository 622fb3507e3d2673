"""The simulator a JSONL case's `simulator.use` (or `tamesu test --simulator`) names: a script, a target of
tamesu.yaml (a simulator agent), or a model."""

from __future__ import annotations

from tamesu.checks.functions import load_function
from tamesu.plan.targets import Resolver, unknown_model
from tamesu.roles.case_user import SimulatorRef


def simulator_named(use: str, resolver: Resolver, config: dict[str, object] | None = None,
                    connector: str | None = None) -> SimulatorRef | str:
    """The simulator `use` (or `--simulator`) names, or why nothing answers to that name."""
    if use.startswith("scripts:"):
        try:
            return SimulatorRef("script", use, config or {}, load_function(use, resolver.search, "simulate"))
        except ValueError as exc:
            return str(exc)
    name = use.removeprefix("agents:")
    helper = resolver.helper(name)
    if helper is not None:
        return SimulatorRef("target", name, config or {}, helper=helper, connector=connector)
    if name in resolver.models or ":" in name:
        why = unknown_model(name, resolver.models)
        return SimulatorRef("model", name, config or {}, connector=connector) if why is None else why
    known = ", ".join(sorted(resolver.models)) or "none configured"
    targets = f"; targets: {', '.join(sorted(resolver.helpers))}" if resolver.helpers else ""
    return f"no model or target named {name!r} for the simulator (models: {known}{targets})"


def connector_problem(named: SimulatorRef, connector: str | None, resolver: Resolver) -> str | None:
    """Why a simulator's `options.connector` cannot be: a model simulator answers with that model (one of
    tamesu.yaml's, or provider:model); a simulator agent gets it as options.connector, its own to read."""
    return unknown_model(connector, resolver.models) if connector is not None and named.kind == "model" else None
