"""`tamesu doctor`: what would stop a run, found before the run. It never prints a secret."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from tamesu.errors import ConfigError, InfraError, TemplateError
from tamesu.report.words import count_of
from tamesu.types import split_addr

if TYPE_CHECKING:
    from tamesu.models.spec import ModelSpec
    from tamesu.plan import Plan
    from tamesu.suite.templates import Context
    from tamesu.targets.base import TargetSpec

Finding = tuple[bool | None, str]
"""(True: fine, None: worth knowing, False: will fail) and one line."""


async def _reachable(url: str, timeout: float = 2.0) -> str | None:
    parsed = urlparse(url)
    if not parsed.hostname:
        return "no host in the URL"
    port = parsed.port or (443 if parsed.scheme in ("https", "wss", "grpcs") else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parsed.hostname, port), timeout)
    except (OSError, TimeoutError) as exc:
        return f"{parsed.hostname}:{port} does not answer ({type(exc).__name__})"
    writer.close()
    return None


_NO_SUITE = ("no suite files match ", "no suite files in ", "the list is empty: name suite files")
"""How `load_plan` says that nothing named a suite (the project's globs, its empty `suites:`, the paths given)."""


async def diagnose(paths: list[Path], config: Path | None) -> list[Finding]:
    from tamesu.plan import load_plan

    findings: list[Finding] = []
    no_suite = False
    version = sys.version_info
    findings.append((version >= (3, 11), f"Python {version.major}.{version.minor}.{version.micro}"))
    for module, purpose in (("a2a", "A2A targets"), ("mcp", "MCP targets"), ("openai", "OpenAI models"),
                            ("anthropic", "Anthropic models")):
        present = importlib.util.find_spec(module) is not None
        findings.append((present, f"{module}: {'installed' if present else 'not installed'} "
                         f"(for {purpose})"))
    from tamesu.cli.installed import findings as installed
    from tamesu.cli.installed import plugin_findings

    findings.extend(installed())
    findings.extend(plugin_findings())
    try:
        plan = load_plan(paths, config, require_secrets=False)
    except ConfigError as exc:
        from tamesu.plan.suites import NOT_A_SUITE

        cases_only = all(p.message.startswith(NOT_A_SUITE) for p in exc.problems)
        # a project with no suite yet (its models written first, as the models page does) is still checked,
        # whatever named none: the default globs, `suites: []` or a folder given (it stopped at those two)
        no_suite = all(p.message.startswith(_NO_SUITE) for p in exc.problems)
        if not cases_only:
            findings.extend((False, str(p)) for p in exc.problems)
            if not no_suite:
                return findings
        # a project whose `suites` are JSONL cases only (`tamesu test` runs them): its models, store and
        # targets are checked all the same (doctor stopped at the first JSONL file)
        try:
            plan = _project_only(paths, config)
        except ConfigError as again:
            findings.extend((False, str(p)) for p in again.problems if str(p) not in {str(q) for q in exc.problems})
            return findings
    where = plan.project.path or "none (defaults)"
    findings.append((True, f"project file: {where}"))
    cases = await _jsonl_findings(paths, config)
    if plan.suites:  # no suite is said once, above: its FAIL, or the JSONL cases that stand for it
        # suites of no test validate, but nothing would run: not an ok line (it read as "all fine")
        findings.append((bool(plan.tests) or None, f"{count_of(len(plan.tests), 'test')} in "
                                                   f"{count_of(len(plan.suites), 'suite')} validate"))
    findings.extend(cases)
    from tamesu.plan.suites import NOT_A_SUITE

    # what `run` would refuse (an unset secret or variable) fails here; the rest is worth knowing, but for the
    # JSONL files among the suites, which doctor has checked just above ("`tamesu validate` checks them")
    fatal = [w for w in plan.warnings if w.message.endswith("is not set") or "is not set (" in w.message]
    findings.extend((False, str(w)) for w in fatal)
    findings.extend((None, str(w)) for w in plan.warnings
                    if w not in fatal and not (cases and w.message.startswith(NOT_A_SUITE)))
    findings.extend(await _model_findings(plan))
    findings.extend(_store_findings(plan))
    findings.extend(await _traces_findings(plan))
    seen: set[str] = set()
    commands: set[str] = set()
    for name, target, context, folder, hooked in _targets(plan):
        if (started := _command(name, target, context, folder)) is not None and started[1] not in commands:
            commands.add(started[1])  # the same target in two suites of one folder: one line
            findings.append((started[0], plan.secrets.redactor.text(started[1])))
        url = getattr(target, "url", None)
        if not isinstance(url, str):
            continue
        if "{{" in url:
            # filled from the environment, secrets and vars as a run fills it; one that needs the run itself
            # (a session's capture, a remote agent's port) is said, not skipped without a word
            try:
                url = context.render_url(url)
            except TemplateError as exc:
                if exc.expr is not None:  # a variable or secret with no value (its FAIL is above), not the run's
                    findings.append((None, f"target {name} ({target.type}): not checked: its url's {exc}"))
                    continue
                url = ""
            if not url or "{{" in url:
                findings.append((None, f"target {name} ({target.type}): its url is made during the run, not "
                                       "checked here"))
                continue
        if (key := _check_key(url, name, target)) in seen:
            continue
        seen.add(key)
        shown = plan.secrets.redactor.text(url)
        problem = await _reachable(url)
        if problem is None and target.type == "a2a":
            # the card, as a run reads it first, and the binding it chooses: an open port says neither
            from tamesu.targets.a2a import A2ASpec
            from tamesu.targets.a2a.checkup import check as check_a2a

            assert isinstance(target, A2ASpec)
            fine, words = await check_a2a(target, name, context, plan.secrets.redactor, folder)
            findings.append((fine, f"target {name} ({target.type}) at {shown}: {words}"))
            continue
        if problem is None and target.type == "mcp" and getattr(target, "command", None) is None:
            # the session's start, as a run opens it: an open port said "reachable" of a url at a wrong path and
            # of a server that refuses the token, and each run failed at its start
            from tamesu.targets.mcp.checkup import check as check_mcp
            from tamesu.targets.mcp.target import McpTargetSpec

            assert isinstance(target, McpTargetSpec)
            fine, words = await check_mcp(target, name, context, plan.secrets.redactor, folder)
            findings.append((fine, f"target {name} ({target.type}) at {shown}: {words}"))
            continue
        if problem is None and url.startswith(("grpc://", "grpcs://")):
            # an open port says nothing of gRPC: an HTTP/1 server, or TLS it cannot make, fails every turn
            from tamesu.net.grpc_channels import probe

            fine, words = await probe(url, getattr(target, "tls", None))
            words = plan.secrets.redactor.text(words)
            findings.append((fine or None, f"target {name} ({target.type}) at {shown}: {words}"))
            continue
        if problem is not None and hooked:
            # `tamesu init`'s sample agent: started by the suite's hook, so not answering before a run is no fault
            problem += "; a before_all hook may start it, as `tamesu run` does (doctor runs no hook)"
        findings.append((problem is None or None, f"target {name} ({target.type}) at {shown}: "
                         f"{'reachable (TCP)' if problem is None else problem}"))
    return findings


def _check_key(url: str, name: str, target: TargetSpec) -> str:
    """What one check of a target's url depends on: the url alone for a TCP connect, and for an a2a target what
    opening it reads (the binding asked for, the credentials the extended card needs, the skill it must offer),
    so two targets of one url that a run opens differently are each checked."""
    shaping = {"transport", "headers", "skill", "tls", "session"} if target.type == "a2a" else {"tls"}
    # an mcp target's line is its session's start, which each target of the url makes with its own headers:
    # each is listed (the second of two at one url went unsaid)
    named = name if target.type == "mcp" else None
    return json.dumps([url, target.type, named, target.model_dump(mode="json", include=shaping)], sort_keys=True,
                      default=str)


async def _jsonl_findings(paths: list[Path], config: Path | None) -> list[Finding]:
    """The JSONL test cases among the project's `suites` (or the paths), checked as `tamesu validate` checks
    them: "0 tests in 0 suites validate" said nothing of them, and a broken case passed doctor."""
    from tamesu.cli.validate import validate_files
    from tamesu.plan.project import split_paths
    from tamesu.plan.targets import TargetProblem

    jsonl = split_paths(paths, config).jsonl
    if not jsonl:
        return []
    try:
        done = await validate_files(jsonl, config, None)
    except ConfigError as exc:
        return [(False, str(p)) for p in exc.problems]
    except TargetProblem as exc:
        return [(False, str(exc))]
    return [(True, f"{count_of(done.cases, 'test case')} in {count_of(done.files, 'JSONL file')} validate"),
            *((None, w) for w in done.warnings if not w.startswith("no -n:"))]  # doctor has no -n to give


def _project_only(paths: list[Path], config: Path | None) -> Plan:
    """The project alone (its models, store, targets), for a project whose suites are JSONL cases."""
    from tamesu.plan import Plan, find_project, load_project
    from tamesu.suite.secrets import Secrets

    project = load_project(config or find_project(paths[0] if paths else Path.cwd()), Path.cwd())
    return Plan(project, secrets=Secrets(project.dir / name for name in project.spec.secrets.env_files))


def _targets(plan: Plan) -> list[tuple[str, TargetSpec, Context, Path, bool]]:
    """Every target of the plan's suites, and the project's own (`tamesu test -n`), with what renders its url, the
    folder it runs from, and whether a `before_all` hook runs before it is spoken to (which may start it)."""
    from tamesu.plan import load_project_targets
    from tamesu.suite.templates import Context

    env = dict(os.environ)
    found: list[tuple[str, TargetSpec, Context, Path, bool]] = []
    project_hooked = bool(plan.project.spec.hooks.before_all)
    for suite in plan.suites:
        context = Context(secrets=plan.secrets, env=env, vars={**plan.project.spec.vars, **suite.spec.vars})
        hooked = project_hooked or bool(suite.spec.hooks.before_all)
        found += [(name, target, context, suite.doc.path.parent, hooked) for name, target in suite.targets.items()]
    if not plan.suites and plan.project.spec.targets:
        with contextlib.suppress(ConfigError):
            context = Context(secrets=plan.secrets, env=env, vars=dict(plan.project.spec.vars))
            found += [(name, target, context, plan.project.dir, project_hooked)
                      for name, target in load_project_targets(plan.project)[0].items()]
    return found


def _command(name: str, target: TargetSpec, context: Context, folder: Path) -> Finding | None:
    """A target tamesu starts (an mcp server's `command`): found where the run will look for it, or None."""
    command = getattr(target, "command", None)
    if not isinstance(command, str):
        return None
    try:
        command = context.render_text(command)
    except TemplateError as exc:
        if exc.expr is not None:  # a variable or secret with no value (its FAIL is above), not the run's
            return None, f"target {name} ({target.type}): not checked: its command's {exc}"
        command = "{{"
    if "{{" in command:
        return None, f"target {name} ({target.type}): its command is made during the run, not checked here"
    # as the run starts it: a path from the suite's folder, a bare name on PATH
    found = str(folder / command) if "/" in command and os.access(folder / command, os.X_OK) else \
        None if "/" in command else shutil.which(command)
    if found is None:
        return False, f"target {name} ({target.type}): command {command!r} " \
                      f"{'is not an executable file' if '/' in command else 'is not on PATH'}"
    return True, f"target {name} ({target.type}): command {command} found ({found})"


def _store_findings(plan: Plan) -> list[Finding]:
    """The results store, when one is configured: the extra installed, the database reachable, its revision."""
    from tamesu.store import DEFAULT_SQLITE, StoreError, StoreLocked, is_default, store_url

    try:
        url = store_url(plan.project.spec.store, plan.project.dir)
    except StoreError as exc:
        return [(False, f"results store: {exc}")]
    if url is None:
        return [(True, "results store: off (store: false in tamesu.yaml or TAMESU_STORE=off)")]
    default_file = plan.project.dir / DEFAULT_SQLITE
    if is_default(plan.project.spec.store) and not default_file.exists():
        return [(True, f"results store: {default_file} (history on by default), created by the first run")]
    try:
        from tamesu.store.db import HEAD_REVISION, Store

        store = Store(url)
    except StoreError as exc:
        return [(False, f"results store: {exc}")]
    try:
        with store._waiting():  # another writer's lock, said as a run says it, not as the driver's bare words
            revision = store._stored_revision()
            with store.engine.connect():
                pass
    except StoreLocked as exc:
        return [(False, f"results store {store.shown}: {str(exc).removeprefix(f'store: {exc.path} ')}")]
    except Exception as exc:
        from tamesu.store.writer import _short

        return [(False, f"results store {store.shown}: cannot connect: {_short(exc)}")]
    finally:
        store.close()
    state = "up to date" if revision == HEAD_REVISION else \
        "empty (created by the first run)" if revision is None else f"at {revision}, migrated by the next run"
    return [(True, f"results store {store.shown}: reachable, {state}")]


async def _traces_findings(plan: Plan) -> list[Finding]:
    """Each `traces:` the suites use: a `receive` address a run can listen on (bound and let go at once), a
    `query` backend that answers and takes its credentials (never shown: the backend is named `jaeger at
    http://***@host`, and what it answers is masked)."""
    from tamesu.engine.traces import receive_address, trace_query

    found: list[Finding] = []
    seen: set[str] = set()
    for spec in [suite.traces for suite in plan.suites if suite.traces is not None]:
        key = spec.model_dump_json(include={"receive", "query"})
        if key in seen:
            continue
        seen.add(key)
        if spec.query is not None:
            try:
                query = trace_query(spec.query, plan.secrets)
                await query.check()
            except InfraError as exc:
                found.append((False, plan.secrets.redactor.text(str(exc))))
                continue
            sent = bool(spec.query.headers) or "@" in spec.query.backend[1].split("://", 1)[-1].split("/", 1)[0]
            found.append((True, f"traces.query: {query.name} answers" + (", its credentials accepted" if sent else "")))
            continue
        assert spec.receive is not None  # the schema asks for one of the two
        try:
            addr = receive_address(spec.receive)
            host, port = split_addr(addr)
            server = await asyncio.get_running_loop().create_server(asyncio.Protocol, host, port)
        except InfraError as exc:
            found.append((False, str(exc)))
            continue
        except OSError as exc:
            words = exc.strerror or str(exc)
            found.append((False, f"traces.receive: cannot listen on {addr}: {words} (the run would stop there, "
                                 "exit 3: is another tamesu or a collector on it?)"))
            continue
        server.close()
        await server.wait_closed()
        found.append((True, f"traces.receive: {addr} can be listened on (OTLP/HTTP, for the agent's spans)"))
    return found


async def _model_findings(plan: Plan) -> list[Finding]:
    """Each configured model, each fallback and each model a target names itself: key present, server reachable,
    key accepted. Keys are never shown."""
    from tamesu.models.client import check
    from tamesu.suite.templates import Context

    context = Context(secrets=plan.secrets, env=dict(os.environ))
    found: list[Finding] = []
    seen: set[str] = set()
    problems: dict[str, str | None] = {}
    """By spec: a model that is also another's fallback is asked once."""
    for where, spec in _models(plan):
        label = f"{spec.provider}:{spec.model or 'fake'}"
        asked = spec.model_copy(update={"fallback": None}).model_dump_json()
        if f"{where}/{asked}" in seen:
            continue
        seen.add(f"{where}/{asked}")
        if asked not in problems:
            problems[asked] = await check(spec, context.render_text, render_url=context.render_url)
        problem = problems[asked]
        # a server may quote back a header or key it was sent, in any encoding: mask what was rendered
        shown = plan.secrets.redactor.text(problem) if problem else "ready"
        found.append((problem is None, f"{where} ({label}): {shown}"))
    return found


def _models(plan: Plan) -> list[tuple[str, ModelSpec]]:
    """Where each model is written, and its spec: `models:`, a target's own `model`/`fallback` (a mapping or
    `provider:model`; a name is one of `models:`), then each one's fallbacks. A fallback is asked only when its
    model fails: its refused key was first met then, in the middle of a run."""
    from tamesu.models.spec import ModelSpec

    declared = [(f"models.{name}", spec) for name, spec in plan.project.spec.models.items()]
    declared += [(f"models.{name}", spec) for suite in plan.suites for name, spec in suite.spec.models.items()]
    for name, target, *_ in _targets(plan):
        for key in ("model", "fallback"):
            value = getattr(target, key, None)
            if isinstance(value, str) and ":" in value:
                with contextlib.suppress(ValueError):  # validate already refused what is neither
                    value = ModelSpec.model_validate(value)
            if isinstance(value, ModelSpec):
                declared.append((f"targets.{name}.{key}", value))
    chained: list[tuple[str, ModelSpec]] = []
    for where, first in declared:
        spec: ModelSpec | None = first
        while spec is not None:
            chained.append((where, spec))
            where, spec = f"{where}.fallback", spec.fallback
    return chained
