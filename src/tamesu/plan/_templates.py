"""Every template of a test and its target names something that can exist at run time."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from tamesu.errors import Problem, article
from tamesu.plan._opened import opened_key
from tamesu.plan.model import LoadedSuite, PlannedTest
from tamesu.suite.remote_agents import RemoteAgentSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import TURN_ROOTS, may_hold, references, resolve_vars, walk_strings
from tamesu.suite.yaml_reader import Document

_VAR_REF = re.compile(r"^vars\.([^.]+)")
_REMOTE_REF = re.compile(r"^remote\.([^.]+)(?:\.(.+))?$")
_REMOTE_FIELDS = ("url", "grpc", "card")
_REMOTE_LIFETIME = ("remote agents run only during each run (started after its before_each hooks, before its "
                    "target opens; stopped after its after_each hooks)")
_CAPTURED_REF = re.compile(r"^captured\.([^.]+)")
_SECRET_REF = re.compile(r"^secrets\.([^.]+)$")
_REQUEST_ROOTS = ("message", "listen", "response", "args", "trace")
"""What a target's request or a model target's tool result has, never a script step (it had no value there: the
next user turn "could not be written", and the agent was blamed)."""
_ENV_REF = re.compile(r"^env\.([^.]+)$")
_SESSION_REF = re.compile(r"^session\.([^.]+)")


@dataclass(frozen=True)
class _Scope:
    """What a template is checked against: the test that renders it, or the suite, for a target no test uses."""

    vars: Mapping[str, object]
    captures: set[str] | None
    """None: no test renders the target, so there is no capture to name or to miss."""
    no_var: str
    """Where a var was looked for, as the line says it."""
    remote_agents: Mapping[str, RemoteAgentSpec]
    shared_by: str = ""


def check_templates(
    test: PlannedTest,
    doc: Document,
    secret_problems: list[Problem],
    problems: list[Problem],
    warnings: list[Problem],
    secrets: Secrets,
) -> None:
    """Every template in the test, its target and its counterpart names something that can exist at run time."""
    raw_test = test.suite.spec.tests[test.index]
    if isinstance(raw_test, dict):
        # without its cases: walking all of them once per case made 20,000 inline cases quadratic
        raw_test = {key: value for key, value in raw_test.items() if key not in ("cases", "vars")}
    scope = _Scope(test.vars, {c.name for c in test.spec.capture},
                   "the test, its cases, the suite or the project", test.suite.spec.remote_agents)
    raw_target = test.suite.spec.targets.get(test.target_name, {})
    _check_strings(("tests", test.index), raw_test, doc, raw_target, scope, test, secret_problems, problems, warnings,
                   secrets)
    target_scope = replace(scope, no_var=f"{_shared_by(test)}, its cases, the suite or the project",
                           shared_by=_shared_by(test))
    counterpart = test.spec.counterpart.target if test.spec.counterpart is not None else None
    # the counterpart is opened and rendered in the test's run as its target is (it was never checked)
    for name in dict.fromkeys([test.target_name, *([counterpart] if counterpart else [])]):
        raw = test.suite.spec.targets.get(name, {})
        _check_strings(("targets", name), raw, _target_doc(name, test.suite, doc), raw, target_scope, test,
                       secret_problems, problems, warnings, secrets)


def check_unused_targets(suite: LoadedSuite, used: set[str], problems: list[Problem],
                         warnings: list[Problem], secrets: Secrets) -> None:
    """A target the suite writes that none of its tests uses is checked as a used one is, against the suite's and
    the project's vars: a template there that names nothing passed `validate` (its schema was checked). An unset
    secret or environment variable is a warning: no run renders the target."""
    written = suite.doc.data.get("targets") if isinstance(suite.doc.data, dict) else None
    if not isinstance(written, dict):
        return  # the project's targets serve other suites and `tamesu test -n`, with their own vars
    merged, _ = resolve_vars({**suite.project.spec.vars, **suite.spec.vars})  # a wrong var: said by each test
    scope = _Scope(merged, None, "the suite or the project", suite.spec.remote_agents)
    for name, raw in suite.spec.targets.items():
        if name in written and name not in used:
            _check_strings(("targets", name), raw, suite.doc, raw, scope, None, warnings, problems, warnings,
                           secrets)


def _check_strings(
    prefix: tuple[str, object],
    raw: object,
    here: Document,
    raw_target: object,
    scope: _Scope,
    test: PlannedTest | None,
    secret_problems: list[Problem],
    problems: list[Problem],
    warnings: list[Problem],
    secrets: Secrets,
) -> None:
    """Every template of `raw` (a test's or a target's, at `prefix`) against `scope`; `raw_target` is the target
    a test's templates or a target's own are rendered by."""
    if not may_hold(raw, "{{"):
        return  # `references` finds nothing in a string without one
    captures = scope.captures
    for path, text in walk_strings(raw):
        for expr, problem in references(text):
            loc = (*prefix, *path)
            if problem:
                problems.append(here.problem(loc, problem))
                continue
            root = expr.partition(".")[0]
            if prefix[0] == "tests" and path[:1] in (("assert",), ("scenario",)) and root in TURN_ROOTS:
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: the turn being sent, for the "
                                            "target's request (its url, headers, body); a test's script and "
                                            "assertions have none"))
            elif prefix[0] == "targets" and (held := _captured_in(expr, scope.vars)) \
                    and (key := _opened(raw_target, path)):
                # the target renders it once, as it opens: exit 3 when it did, or a turn that failed
                via = f" (which holds {{{{{held}}}}})" if held != expr else ""
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}{via}: the target renders its "
                                            f"{key} as it opens, before the first turn, so nothing is captured "
                                            "yet"))
            elif prefix[0] == "tests" and test is not None and root == "captured" \
                    and path[:3] == ("scenario", "script", 0) and _said_first(test, raw):
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: the first step is said before "
                                            "the agent's first turn, so nothing is captured yet"))
            elif prefix[0] == "tests" and path[:1] == ("scenario",) and root in _REQUEST_ROOTS:
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: it has a value in a target's "
                                            "request or a model target's tool result, never in a test's script"))
            elif root == "run" and expr not in ("run", "run.id", "run.number"):
                # `{{run.nope}}` validated, then failed the test as the agent's fault at its turn
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: a run has run.id and "
                                            "run.number"))
            elif (m := _VAR_REF.match(expr)) and m.group(1) not in scope.vars:
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: no var {m.group(1)!r} "
                                            f"in {scope.no_var}"))
            elif m and (unset := _unset_in(scope.vars[m.group(1)], secrets)):
                # as if written here: the run put it in, and the turn "could not be written", the agent blamed
                secret_problems.append(here.problem(loc, f"{unset} (in {{{{{expr}}}}})"))
            elif (m := _CAPTURED_REF.match(expr)) and captures is not None and m.group(1) not in captures \
                    and prefix[0] == "tests":
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: the test captures no "
                                            f"{m.group(1)!r}"))
            elif m and captures is not None and m.group(1) not in captures:
                # a warning: a target's tool_results may name it for a tool only the capturing tests call
                warnings.append(here.problem(loc, f"{{{{{expr}}}}}: {scope.shared_by} captures no "
                                            f"{m.group(1)!r}: every turn that renders this fails"))
            elif prefix[0] == "targets" and ((wrong := _rest_mode_problem(raw_target, root, path))
                                             or ((m := _SESSION_REF.match(expr))
                                                 and (wrong := _session_problem(raw_target, m.group(1))))):
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: {wrong}"))
            elif (m := _ENV_REF.match(expr)) and m.group(1) not in os.environ:
                secret_problems.append(here.problem(loc, f"environment variable {m.group(1)} is not set"))
            elif (m := _SECRET_REF.match(expr)) and not secrets.has(m.group(1)):
                secret_problems.append(here.problem(loc, secrets.unset(m.group(1))))
            elif (m := _REMOTE_REF.match(expr)) and (wrong := _remote_problem(scope.remote_agents, m)):
                problems.append(here.problem(loc, f"bad template {{{{{expr}}}}}: {wrong}"))
            elif m and prefix[0] == "tests" and len(path) > 2 and path[0] == "assert" and path[2] == "command":
                problems.append(here.problem(loc, f"{{{{{expr}}}}}: {_REMOTE_LIFETIME}; a command "
                                            "assertion runs after they stop"))


def _captured_in(expr: str, variables: Mapping[str, object]) -> str | None:
    """The `captured.NAME` a template names, itself or through the var it names."""
    if expr.startswith("captured."):
        return expr
    if (m := _VAR_REF.match(expr)) and m.group(1) in variables:
        for _, text in walk_strings(variables[m.group(1)]):
            for inner, _ in references(text):
                if inner.startswith("captured."):
                    return inner
    return None


def _opened(raw_target: object, path: tuple[object, ...]) -> str | None:
    """The key of a built-in target's configuration holding `path` that is rendered as the target opens."""
    from tamesu import plugins, targets

    kind = raw_target.get("type") if isinstance(raw_target, dict) else None
    if not isinstance(raw_target, dict) or not isinstance(kind, str) or not targets.is_known(kind) \
            or not plugins.is_built_in("targets", kind):
        return None
    return opened_key(kind, raw_target, path)


def _shared_by(test: PlannedTest) -> str:
    """The test a target's template is checked for: every test of the target shares that line of the suite."""
    return f"test {test.name!r} (tests[{test.index}])"


def _unset_in(value: object, secrets: Secrets) -> str | None:
    """The first environment variable or secret a var's value names that is not set."""
    for _, text in walk_strings(value):
        for expr, _ in references(text):
            if (m := _ENV_REF.match(expr)) and m.group(1) not in os.environ:
                return f"environment variable {m.group(1)} is not set"
            if (m := _SECRET_REF.match(expr)) and not secrets.has(m.group(1)):
                return secrets.unset(m.group(1))
    return None


def _said_first(test: PlannedTest, raw_test: object) -> bool:
    """Whether the script's first step is said before the agent says anything: it waits for nothing, and the
    target's agent does not speak first (a greeting, which a capture could read)."""
    from tamesu import targets
    from tamesu.targets.base import Target

    scenario = raw_test.get("scenario") if isinstance(raw_test, dict) else None
    script = scenario.get("script") if isinstance(scenario, dict) else None
    first = script[0] if isinstance(script, list) and script else None
    if not isinstance(first, dict) or "wait_for" in first or not targets.is_known(test.target.type):
        return False
    return targets.target_class(test.target.type).greeting is Target.greeting


def _target_doc(name: str, suite: LoadedSuite, doc: Document) -> Document:
    """The file that writes the target `name`: the suite's, or tamesu.yaml for a target of the project's (its
    problems were placed at the suite's 1:1)."""
    own = doc.data.get("targets") if isinstance(doc.data, dict) else None
    if isinstance(own, dict) and name in own:
        return doc
    project = suite.project.doc
    targets = project.data.get("targets") if project is not None and isinstance(project.data, dict) else None
    return project if project is not None and isinstance(targets, dict) and name in targets else doc


def check_suite_hooks(doc: Document, problems: list[Problem]) -> None:
    """`{{remote.X...}}` in a before_all, after_all or before_each hook: no remote agent is up then."""
    hooks = doc.data.get("hooks") if isinstance(doc.data, dict) else None
    if not isinstance(hooks, dict):
        return
    for stage in ("before_all", "after_all", "before_each"):
        for path, text in walk_strings(hooks.get(stage)):
            for expr, _ in references(text):
                if _REMOTE_REF.match(expr):
                    problems.append(doc.problem(("hooks", stage, *path), f"{{{{{expr}}}}}: {_REMOTE_LIFETIME}; "
                                                f"{stage} hooks run when none is up"))


def _rest_mode_problem(raw_target: object, root: str, path: tuple[object, ...]) -> str | None:
    """A rest target's `{{listen...}}` without `response.listen`, or `{{response...}}` anywhere but its
    `response.poll`: never a value there, and every run was the environment's error at its first turn."""
    if not isinstance(raw_target, dict) or raw_target.get("type") != "rest" or root not in ("listen", "response"):
        return None
    response = raw_target.get("response")
    modes = response if isinstance(response, dict) else {}
    if root == "listen" and "listen" not in modes:
        return "the address of the listener response.listen serves, and this target has no response.listen"
    if root == "response" and path[:2] != ("response", "poll"):
        return "the send's answer, which only response.poll's url, method, headers and body read"
    return None


def _session_problem(raw_target: object, name: str) -> str | None:
    """Why a built-in target's `{{session.NAME}}` can have no value: it is what its `session.open` captures, or
    a value the type fills itself (sip's `uri`, mcp's `port`)."""
    from tamesu import plugins, targets

    if not isinstance(raw_target, dict):
        return None
    kind = raw_target.get("type")
    if not isinstance(kind, str) or not targets.is_known(kind) or not plugins.is_built_in("targets", kind):
        return None  # a plug-in's type: its own names are its own
    own = targets.target_class(kind).session_names
    if name in own:
        return None
    fills = f" ({article(f'{kind} target')} fills only {', '.join(sorted(own))} itself)" if own else ""
    session = raw_target.get("session")
    opened = session.get("open") if isinstance(session, dict) else None
    if not isinstance(opened, dict):
        return f"the target has no session.open to capture it{fills}"
    captured = opened.get("capture")
    if not isinstance(captured, dict) or name in captured:
        return None
    return f"session.open captures no {name!r} (it captures {', '.join(map(str, captured)) or 'nothing'}){fills}"


def _remote_problem(declared: Mapping[str, RemoteAgentSpec], match: re.Match[str]) -> str | None:
    """What is wrong with `{{remote.NAME.FIELD}}`: an agent the suite does not declare, or an unknown field."""
    name, field_name = match.group(1), match.group(2)
    if name not in declared:
        return f"no remote agent {name!r} (remote_agents: {', '.join(declared) or 'none declared'})"
    if field_name not in _REMOTE_FIELDS:
        return f"a remote agent has {', '.join(_REMOTE_FIELDS)}"
    forward = declared[name].forward
    if forward is None or "{{" in forward:
        return None
    # a forwarding agent relays the binding it forwards to, unchanged: it translates none into another
    over_grpc = forward.lower().startswith(("grpc://", "grpcs://"))
    if over_grpc and field_name in ("url", "card"):
        return (f"remote agent {name} forwards to a gRPC agent ({forward}): it serves no HTTP card or endpoint "
                f"(call it at {{{{remote.{name}.grpc}}}})")
    if not over_grpc and field_name == "grpc":
        return (f"remote agent {name} forwards to an HTTP agent ({forward}): it serves no gRPC (call it at "
                f"{{{{remote.{name}.url}}}}, or forward to the real agent's grpc:// address)")
    return None


_HOOK_ROOTS = {"before_all": ("vars", "env", "secrets"), "after_all": ("vars", "env", "secrets")}
"""What a suite's first and last hooks can read: they run before any test and after every one, in the suite's
context (its and the project's vars), so nothing of a test (captured, run, remote, session) is there."""


def check_hook_templates(hooks: object, doc: Document, variables: set[str], test_vars: Mapping[str, set[str]],
                         secret_problems: list[Problem], problems: list[Problem], secrets: Secrets,
                         captures: set[str] | None = None) -> None:
    """Every template of a `hooks:` block (a suite's or tamesu.yaml's, as written) names something that exists
    when the hook runs; `test_vars` are the vars of each test the hooks run around (by its id; a skipped one left
    out), for its `before_each`/`after_each`, `captures` the names any of its tests captures (None: not known
    here), for its `after_each`."""
    if not isinstance(hooks, dict):
        return
    for stage, entries in hooks.items():
        for path, text in walk_strings(entries):
            loc = ("hooks", stage, *path)
            for expr, problem in references(text):
                root = expr.partition(".")[0]
                if problem:
                    problems.append(doc.problem(loc, problem))
                elif stage in _HOOK_ROOTS and root not in _HOOK_ROOTS[stage] and root != "remote":
                    # `remote.` is said by check_suite_hooks, with why (it was said twice)
                    article = "an" if stage.startswith("after") else "a"
                    problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: {article} {stage} hook runs "
                                                f"{'before' if stage == 'before_all' else 'after'} every test, "
                                                "where only vars, env and secrets have values"))
                elif stage == "before_each" and root == "captured":
                    problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: a before_each hook runs before "
                                                "the conversation, which captures nothing yet (an after_each hook "
                                                "has its captures)"))
                elif captures is not None and (m := _CAPTURED_REF.match(expr)) and m.group(1) not in captures:
                    # a name no test captures fails the hook after every run, a warning each time: a typo
                    known = f" (the tests capture {', '.join(sorted(captures))})" if captures else ""
                    problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: no test captures "
                                                f"{m.group(1)!r}{known}"))
                elif (m := _VAR_REF.match(expr)) and m.group(1) not in variables and (
                        stage in _HOOK_ROOTS or (lacking := [t for t, v in test_vars.items() if m.group(1) not in v])):
                    if stage in _HOOK_ROOTS or len(lacking) == len(test_vars):
                        problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: no var {m.group(1)!r} in "
                                                    "the suite or the project"))
                    else:  # the hook runs around every test: each run of these would be an error (exit 3)
                        more = f" and {len(lacking) - 1} more" if len(lacking) > 1 else ""
                        article = "an" if stage.startswith("after") else "a"
                        problems.append(doc.problem(loc, f"bad template {{{{{expr}}}}}: test {lacking[0]!r}{more} "
                                                    f"has no var {m.group(1)!r}, and {article} {stage} hook runs "
                                                    "around every test (give it one, or a default in vars:)"))
                elif (m := _ENV_REF.match(expr)) and m.group(1) not in os.environ:
                    secret_problems.append(doc.problem(loc, f"environment variable {m.group(1)} is not set"))
                elif (m := _SECRET_REF.match(expr)) and not secrets.has(m.group(1)):
                    secret_problems.append(doc.problem(loc, secrets.unset(m.group(1))))


def model_secret_warnings(doc: Document, secrets: Secrets) -> list[Problem]:
    """A `models:` entry's secret or environment variable that is not set (an `api_key`, a header): a warning,
    since a model no test of this run calls needs no key, where a target's missing secret fails every test.
    `traces.query`'s (its URL's password, a token header) alike: filled in when a suite that asks it runs."""
    return [*_unset(doc, secrets, ("models",), "a test that calls this model will be an error"),
            *_unset(doc, secrets, ("traces", "query"), "each test of a suite that asks this backend will be an error")]


def _unset(doc: Document, secrets: Secrets, keys: tuple[str, ...], then: str) -> list[Problem]:
    block: object = doc.data
    for key in keys:
        block = block.get(key) if isinstance(block, dict) else None
    said: list[Problem] = []
    if not isinstance(block, dict) or not may_hold(block, "{{"):
        return said
    for path, text in walk_strings(block):
        for expr, problem in references(text):
            if problem:
                continue  # the block's own check says it
            if (m := _ENV_REF.match(expr)) and m.group(1) not in os.environ:
                said.append(doc.problem((*keys, *path), f"environment variable {m.group(1)} is not set: {then}"))
            elif (m := _SECRET_REF.match(expr)) and not secrets.has(m.group(1)):
                said.append(doc.problem((*keys, *path), f"{secrets.unset(m.group(1))}: {then}"))
    return said


def var_problems(test_loc: tuple[object, ...], doc: Document, project_doc: Document | None,
                 layers: tuple[Mapping[str, object], Mapping[str, object], Mapping[str, object]],
                 case: tuple[int | None, str, Mapping[str, object]] | None, wrong: Mapping[str, str],
                 row: Callable[[str, str], Problem] | None = None) -> list[Problem]:
    """Each var's problem (`resolve_vars`) where the var the test sees is written: its case's, the test's, the
    suite's or tamesu.yaml's `vars:` (`layers`: the project's, the suite's, the test's; `case`: its index among
    the inline cases or None for a cases_file row, its name and vars; `row`: a cases_file row's problem at a
    value of it, in the cases file)."""
    project, suite, own = layers
    said: list[Problem] = []
    for name, why in wrong.items():
        if case is not None and name in case[2]:
            index, case_name, _ = case
            said.append(doc.problem((*test_loc, "cases", index, "vars", name), why) if index is not None else
                        row(name, why) if row is not None else
                        doc.problem((*test_loc, "cases_file"), f"case {case_name!r}: vars.{name}: {why}"))
        elif name in own:
            said.append(doc.problem((*test_loc, "vars", name), why))
        elif name in suite or project_doc is None:
            said.append(doc.problem(("vars", name), why))
        elif name in project:
            said.append(project_doc.problem(("vars", name), why))
    return said


def check_default_templates(doc: Document | None, tests: Sequence[PlannedTest], problems: list[Problem]) -> None:
    """`defaults.assert` (a suite's, or tamesu.yaml's) is graded on every test's runs with that test's vars and
    captures: one naming a var or a capture a test lacks could not check there, a failure blamed on the agent
    (exit 1). Said where the default is written, naming the first test that lacks it."""
    defaults = doc.data.get("defaults") if doc is not None and isinstance(doc.data, dict) else None
    entries = defaults.get("assert") if isinstance(defaults, dict) else None
    if doc is None or not isinstance(entries, list) or not may_hold(entries, "{{"):
        return
    graded = [test for test in tests if not test.spec.skip]
    for path, text in walk_strings(entries):
        for expr, problem in references(text):
            if problem:
                continue  # a template that is no template: said where each test's assertions are parsed
            if m := _VAR_REF.match(expr):
                kind, lacking = "var", [t.id for t in graded if m.group(1) not in t.vars]
            elif m := _CAPTURED_REF.match(expr):
                kind, lacking = "capture", [t.id for t in graded if m.group(1) not in {c.name for c in t.spec.capture}]
            else:
                continue
            if not lacking:
                continue
            who = f"no test has the {kind} {m.group(1)!r}" if len(lacking) == len(graded) else \
                f"test {lacking[0]!r}{f' and {len(lacking) - 1} more' if len(lacking) > 1 else ''} has no {kind} " \
                f"{m.group(1)!r}"
            problems.append(doc.problem(("defaults", "assert", *path), f"bad template {{{{{expr}}}}}: {who} (a "
                                        "default assertion is graded on every test's runs)"))
