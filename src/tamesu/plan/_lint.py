"""Checks of a loaded suite beyond its schema, for what would otherwise go wrong quietly at run time:

- a script step's `files:` that do not exist (a problem: the run could only fail, later, as an infra error),
  or that the test's target would not send (a problem: the agent would never see them);
- a `golden` file that does not exist (a warning, not a problem: `run --update-golden` is how it comes to be;
  without it the run is an error of the suite's making, never the agent's failure);
- a tool assertion on an A2A target (a warning): an A2A agent reports no tool calls, so `tool_called` can
  only fail there, unless the name is one of the suite's remote agents, whose delegations count as calls;
- a `span` assertion or a metric of the agent's spans in a suite that receives none, and an assertion on a
  turn past the end of a script nobody else speaks in (warnings: every run would be an error of the suite's
  making, never the agent's failure);
- a tag `--tags` can never choose (a comma, a leading `!` or `-`, spaces around it) (a warning);
- a k of `pass_k` more than `repeat` (a warning: pass^k cannot be estimated from fewer runs, and is left out);
- a judge told to read the agent's trace (`judge: {trace: true}`, a test's own or in `defaults:`) in a suite
  that receives no spans (a warning: the judge would be shown no spans and grade the transcript alone);
- a remote agent's `token` naming a secret or environment variable that is not set (a warning: the run
  of any test of the suite would stop with an infrastructure error when it starts the agent);
- a remote agent's name that `{{remote.NAME.url}}` cannot write (a dot, a space): a problem when the agent
  has no `addr`, since that template is the only way its free port reaches a caller; a warning beside a fixed
  `addr`, which reaches it without one (`delegated_to` names it as written);
- a model the price table does not know, with no `price:`, under a dollar budget (a warning: its calls count
  as $0, so the budget would never stop them);
- a remote agent without `addr` that no `{{remote.NAME...}}` template names (a warning: nothing can find its free
  port, so every delegation to it expected fails);
- a model whose provider needs an API key, with no `api_key` written and its environment variable not set
  (a warning: a test that calls it is an error, exit 3, said only then; answers in the replay cache need none);
- a `tls:` block's `ca_file`, `cert_file` or `key_file` that is not on this machine (a warning, not a problem:
  a certificate is often put in place only for the run, a CI secret mounted after a lint step; a run that
  needs it stops on one line naming it, exit 3).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tamesu.checks import Assertion
from tamesu.errors import Problem
from tamesu.models.spec import ModelSpec
from tamesu.suite.schema import TestSpec
from tamesu.suite.secrets import Secrets
from tamesu.suite.templates import is_name_part, references
from tamesu.suite.yaml_reader import Document
from tamesu.types import expand_home

if TYPE_CHECKING:
    from tamesu.plan.model import LoadedSuite

Loc = tuple[Any, ...]


def missing_files(suite: LoadedSuite, spec: TestSpec, loc: Loc) -> list[Problem]:
    problems = []
    for s, step in enumerate(spec.scenario.script):
        for f, file in enumerate(step.files):
            if file.path is not None and "{{" not in file.path and not (suite.dir / file.path).is_file():
                problems.append(suite.doc.problem((*loc, "scenario", "script", s, "files", f),
                                                  f"file not found: {suite.dir / file.path} (a path is relative "
                                                  "to the suite's folder)"))
    return problems


def missing_golden(suite: LoadedSuite, spec: TestSpec, assertions: list[Assertion], loc: Loc) -> list[Problem]:
    """`assertions` are the test's own, in the order `spec.assert_` writes them."""
    from tamesu.checks.golden import Golden

    warnings = []
    for index, assertion in enumerate(assertions[:len(spec.assert_)]):
        check = getattr(assertion.check, "inner", assertion.check)  # `negate: true` wraps it
        if not isinstance(check, Golden) or "{{" in check.spec.file or (suite.dir / check.spec.file).is_file():
            continue
        warnings.append(suite.doc.problem((*loc, "assert", index, "golden"),
                                          f"no golden file {check.spec.file} yet (relative to the suite's folder): "
                                          "a run with --update-golden writes it, a run without it is an error"))
    return warnings


def refused_files(suite: LoadedSuite, spec: TestSpec, loc: Loc) -> list[Problem]:
    """A script step's file that the test's target would not send (a rest body without `{{attachments}}`, a
    model whose provider takes no such file). Only target types that declare what they carry are asked."""
    from tamesu import targets
    from tamesu.roles.simulator import file_ref
    from tamesu.targets.base import Target

    target = suite.targets.get(spec.target)
    if target is None or not any(step.files for step in spec.scenario.script):
        return []
    cls = targets.target_class(target.type)
    if cls.file_refusal.__func__ is Target.file_refusal.__func__:  # type: ignore[attr-defined]  # a bound classmethod's __func__ is untyped
        return []
    models = {**suite.project.spec.models, **suite.spec.models}
    problems = []
    for s, step in enumerate(spec.scenario.script):
        for f, file in enumerate(step.files):
            reason = cls.file_refusal(target, file_ref(file, suite.dir), models)
            if reason is not None:
                problems.append(suite.doc.problem((*loc, "scenario", "script", s, "files", f),
                                                  f"target {spec.target} cannot send this file: {reason}"))
    return problems


def a2a_tool_assertions(suite: LoadedSuite, spec: TestSpec, assertions: list[Assertion], loc: Loc
                        ) -> list[Problem]:
    """`assertions` are the test's own, in the order `spec.assert_` writes them."""
    target = suite.targets.get(spec.target or "")
    own = assertions[:len(spec.assert_)]  # an attack's pack may follow them
    if target is None or len(own) != len(spec.assert_):
        return []
    from tamesu.plan._fit import unseen_tools

    # the suite's error at each run too (`PlannedTest.unfit`)
    return [suite.doc.problem((*loc, "assert", index), f"{why}: every run of the test is an error")
            for index, assertion in enumerate(own)
            if (why := unseen_tools(assertion, target.type, suite.spec.remote_agents, _traced(suite))) is not None]


def untraced_judges(suite: LoadedSuite, spec: TestSpec, assertions: list[Assertion], loc: Loc) -> list[Problem]:
    """`assertions` are the test's own, in the order `spec.assert_` writes them."""
    if _traced(suite):
        return []
    return _judge_warnings(suite.doc, [((*loc, "assert", index), assertion)
                                       for index, assertion in enumerate(assertions[:len(spec.assert_)])])


def untraced_default_judges(suite: LoadedSuite, own: list[tuple[int, Assertion]],
                            project: list[tuple[int, Assertion]]) -> list[Problem]:
    """The same for `defaults.assert` of the suite (`own`) and of tamesu.yaml (`project`), by their index
    there: a default judge reads the trace in every test of a suite that has no `traces:`."""
    if _traced(suite):
        return []
    here = [(("defaults", "assert", i), a) for i, a in own]
    warnings = _judge_warnings(suite.doc, here) + _span_warnings(suite.doc, here)
    if suite.project.doc is not None:
        there = [(("defaults", "assert", i), a) for i, a in project]
        warnings += _judge_warnings(suite.project.doc, there) + _span_warnings(suite.project.doc, there)
    return warnings


def untraced_spans(suite: LoadedSuite, spec: TestSpec, assertions: list[Assertion], loc: Loc) -> list[Problem]:
    """`span` assertions and metrics of the agent's spans in a suite that receives none: each run is an error."""
    if _traced(suite):
        return []
    return _span_warnings(suite.doc, [((*loc, "assert", index), assertion)
                                      for index, assertion in enumerate(assertions[:len(spec.assert_)])])


def _span_warnings(doc: Document, located: list[tuple[Loc, Assertion]]) -> list[Problem]:
    from tamesu.checks.metric import Metric
    from tamesu.checks.span import SpanCheck

    warnings = []
    for where, assertion in located:
        check = getattr(assertion.check, "inner", assertion.check)  # `negate: true` wraps it
        if isinstance(check, SpanCheck):
            what = "span reads the agent's spans"
        elif isinstance(check, Metric) and check.reads_spans():
            what = f"metric {check.spec.name} is measured from the agent's spans"
        else:
            continue
        warnings.append(doc.problem((*where, assertion.key), (
            f"{what}, but no `traces:` receives them (tamesu.yaml or the suite): every run of the test is an "
            "error")))
    return warnings


def turns_past_script(suite: LoadedSuite, spec: TestSpec, assertions: list[Assertion], loc: Loc) -> list[Problem]:
    """An assertion on a turn past the end of a test's script (nobody else speaks): every run is an error."""
    from tamesu.plan.model import scripted_turns, turn_asked, turn_past

    turns = scripted_turns(spec, suite.targets.get(spec.target))
    warnings = []
    for index, assertion in enumerate(assertions[:len(spec.assert_)] if turns is not None else []):
        past = turn_past(assertion, turns)
        if past is None:
            continue
        own = isinstance(assertion.on_turn, int) and assertion.on_turn == turn_asked(assertion)
        where = (*loc, "assert", index, *(("on_turn",) if own else (assertion.key, "on_turn")))
        warnings.append(suite.doc.problem(where, f"{past}: every run of the test is an error"))
    return warnings


def ks_past_repeat(suite: LoadedSuite, spec: TestSpec, loc: Loc) -> list[Problem]:
    """A k of `pass_k` more than the test's `repeat`: pass^k of fewer runs cannot be estimated (it is left out)."""
    return [suite.doc.problem((*loc, "pass_k", index),
                              f"pass_k {k} is more than repeat ({spec.repeat}): pass^{k} cannot be estimated from "
                              f"{spec.repeat} run{'' if spec.repeat == 1 else 's'}, so it is left out")
            for index, k in enumerate(spec.pass_k) if k > spec.repeat]


def unselectable_tags(suite: LoadedSuite, spec: TestSpec, loc: Loc) -> list[Problem]:
    """A tag `--tags` can never choose (an empty one), or only in double quotes: it splits at commas, strips
    spaces, and reads a leading `!` or `-` as "without" (tamesu.cli.shared.split_tags)."""
    said = []
    for index, tag in enumerate(spec.tags):
        why = ("it has a comma, where --tags splits" if "," in tag else
               "it begins with '!' or '-', which --tags reads as 'without'" if tag.startswith(("!", "-")) else
               "it begins or ends with a space, which --tags strips" if tag != tag.strip() else None)
        if not tag.strip() or '"' in tag:
            said.append(suite.doc.problem((*loc, "tags", index), f"tag {tag!r} can never be chosen with --tags: "
                                          f"{'it is empty' if not tag.strip() else 'it has a double quote'}"))
        elif why is not None:
            said.append(suite.doc.problem((*loc, "tags", index), f"tag {tag!r} can be chosen with --tags only in "
                                          f"double quotes ('\"{tag}\"'): {why}"))
    return said


def _traced(suite: LoadedSuite) -> bool:
    return suite.traces is not None


def _judge_warnings(doc: Document, placed: list[tuple[Loc, Assertion]]) -> list[Problem]:
    from tamesu.checks.judge import Judge

    return [doc.problem((*loc, "judge", "trace"),
                        "judge trace: true, but no `traces:` receives the agent's spans (tamesu.yaml or the "
                        "suite): the judge sees no trace")
            for loc, assertion in placed
            if isinstance(assertion.check, Judge) and getattr(assertion.check.spec, "trace", False)]


def keyless_models(doc: Document | None, models: Mapping[str, ModelSpec]) -> list[Problem]:
    """Each model (or fallback of one) of `models`, written in `doc`, that has no API key to send: the run said
    `simulator: openai: no API key (set OPENAI_API_KEY or models.X.api_key)` on every test, where `validate`
    had said nothing."""
    from tamesu.models.client import DEFAULT_BASE_URLS, DEFAULT_ENV_BASE_URLS, DEFAULT_ENV_KEYS
    from tamesu.models.said import is_local_url

    warnings: list[Problem] = []
    for name, named in models.items():
        spec: ModelSpec | None = named
        loc: Loc = ("models", name)
        while spec is not None and doc is not None:
            variable = DEFAULT_ENV_KEYS.get(spec.provider)
            base_url = spec.base_url or os.environ.get(DEFAULT_ENV_BASE_URLS.get(spec.provider, "")) or \
                DEFAULT_BASE_URLS.get(spec.provider, "")
            if variable is not None and not spec.api_key and not os.environ.get(variable) \
                    and "{{" not in base_url and not is_local_url(base_url):
                written = ".".join(str(part) for part in loc)
                entry: object = doc.data
                for part in loc:
                    entry = entry.get(part) if isinstance(entry, dict) else None
                # at `provider:` in a mapping; `openai:gpt-4o` written as one string is said as itself
                warnings.append(doc.problem((*loc, "provider") if isinstance(entry, dict) else loc, (
                    f"no API key: {variable} is not set and {written}.api_key is not written: a test that calls "
                    "this model will be an error (answers in the replay cache need none)")))
            spec, loc = spec.fallback, (*loc, "fallback")
    return warnings


def unpriced_models(suite: LoadedSuite) -> list[Problem]:
    """A model of the suite or the project (or a fallback of one) whose calls would count as $0 against
    `budget.usd`: not fake, not on this machine, no `price:`, and not in the price table."""
    project = suite.project
    if project.spec.budget.usd is None and suite.spec.budget.usd is None:
        return []
    # here, not at the top: loading a plan without a budget never imports the model client
    from tamesu.models import pricing
    from tamesu.models.said import is_local_url

    warnings = []
    for doc, models in ((project.doc, project.spec.models), (suite.doc, suite.spec.models)):
        for name, named in models.items():
            spec: ModelSpec | None = named
            loc: Loc = ("models", name)
            while spec is not None and doc is not None:
                if spec.provider != "fake" and spec.price is None and not is_local_url(spec.base_url) \
                        and pricing.price(spec.model) is None:
                    warnings.append(doc.problem(loc, (
                        f"no price known for {spec.provider}:{spec.model}: its calls count as $0 against budget.usd, "
                        "which cannot stop them (give the model price: {input_per_mtok, output_per_mtok})")))
                spec, loc = spec.fallback, (*loc, "fallback")
    return warnings


def remote_tokens(suite: LoadedSuite, doc: Document, secrets: Secrets, problems: list[Problem]) -> list[Problem]:
    """Warnings for a remote agent's token, forward url or forwarded header that names an unset secret or
    variable; a template in them that is not one (`{{secrets.X` unclosed) is a problem: it would be sent as is."""
    warnings = []
    for name, agent in suite.spec.remote_agents.items():
        # a token or a forwarded header that names an unset secret: said before the run, not at its start
        places: list[tuple[tuple[str, ...], str]] = [(("remote_agents", name, "token"), agent.token or ""),
                                                     (("remote_agents", name, "forward"), agent.forward or "")]
        places += [(("remote_agents", name, "headers", header), value)
                   for header, value in (getattr(agent, "headers", None) or {}).items() if isinstance(value, str)]
        for loc, text in places:
            for expr, problem in references(text):
                root, _, key = expr.partition(".")
                if problem:
                    problems.append(doc.problem(loc, problem))
                    continue
                if root == "secrets" and not secrets.has(key):
                    warnings.append(doc.problem(loc, f"{secrets.unset(key)}: the remote agent "
                                                     "cannot start"))
                elif root == "env" and key not in os.environ:
                    warnings.append(doc.problem(loc, f"environment variable {key} is not set: the remote agent "
                                                     "cannot start"))
    return warnings


def remote_names(suite: LoadedSuite, doc: Document, problems: list[Problem]) -> list[Problem]:
    """A remote agent's name no `{{remote.NAME...}}` template can write, said at the name: a problem without an
    `addr` (its URL, on a free port, reaches a caller only so), else a warning. Before, it was refused only where a
    template used it, as another agent (`no remote agent 'billing'` for `billing.v2`) or no template at all."""
    warnings = []
    for name, agent in suite.spec.remote_agents.items():
        if is_name_part(name):
            continue
        fit = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")
        could = f" ({fit} could)" if fit else ""
        said = (f"the name {json.dumps(name, ensure_ascii=False)} cannot be written in {{{{remote.NAME.url}}}}: "
                f"a template's names are letters, digits, _ and -{could}")
        if agent.addr is None:
            problems.append(doc.problem(("remote_agents", name), f"{said}, and without addr that template is the "
                                        "only way its URL (a free port) reaches a caller: rename it", key=True))
        else:
            warnings.append(doc.problem(("remote_agents", name), f"{said}; its fixed addr reaches it, but no "
                                        "template can give its URL, card or grpc address", key=True))
    return warnings


def unreachable_remote_agents(suite: LoadedSuite, doc: Document) -> list[Problem]:
    """A remote agent with no `addr` that no template of the suite or its project names (a warning): its URL is
    on a free port, new each run, so nothing can call it; before, `delegated_to: it` failed every run as the
    agent's fault ("no delegation to unused; delegated to: billing"), though no agent could have found it."""
    unplaced = [name for name, agent in suite.spec.remote_agents.items()
                if agent.addr is None and is_name_part(name)]  # a name no template can write: remote_names says it
    if not unplaced:
        return []  # most suites: their documents are not walked
    texts = [*_strings(doc.data), *_strings(suite.project.doc.data if suite.project.doc else None)]
    warnings = []
    for name in unplaced:
        named = re.compile(rf"remote\s*\.\s*{re.escape(name)}(?![A-Za-z0-9_-])")
        if not any(named.search(text) for text in texts):
            warnings.append(doc.problem(("remote_agents", name), (
                f"no template names the remote agent {name} ({{{{remote.{name}.url}}}}, .grpc or .card) and it has "
                "no addr: nothing can find it on its free port, so a delegation to it can never happen"), key=True))
    return warnings


def _strings(data: object) -> list[str]:
    """Every string in a parsed YAML document, at any depth."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [text for value in data.values() for text in _strings(value)]
    if isinstance(data, list):
        return [text for value in data for text in _strings(value)]
    return []


_TLS_FILES = ("ca_file", "cert_file", "key_file")


def missing_tls_files(suite: LoadedSuite) -> list[Problem]:
    """Every `tls:` block of the suite and of its project outside its tests (targets, models, remote agents,
    hooks, `defaults`) whose files are not here; a templated path is left to the run. The tests are not walked:
    planning costs the same per test with or without this (an `http` check's own block is said by its run)."""
    warnings = []
    for doc in (suite.project.doc, suite.doc):
        if doc is None or not isinstance(doc.data, dict):
            continue
        outside = {key: value for key, value in doc.data.items() if key != "tests"}
        for loc, block in _tls_blocks(outside, ()):
            for key in _TLS_FILES:
                name = block.get(key)
                if isinstance(name, str) and "{{" not in name and not Path(expand_home(name)).is_file():
                    relative = "" if Path(expand_home(name)).is_absolute() else \
                        " (a relative path is from the folder tamesu runs in)"
                    warnings.append(doc.problem((*loc, key), f"no such file here: {name}{relative}: a run "
                                                             "that uses it stops unless it is there by then"))
    return warnings


def _tls_blocks(data: object, loc: Loc) -> list[tuple[Loc, dict[str, Any]]]:
    if isinstance(data, list):
        return [found for index, item in enumerate(data) for found in _tls_blocks(item, (*loc, index))]
    if not isinstance(data, dict):
        return []
    found: list[tuple[Loc, dict[str, Any]]] = []
    for key, value in data.items():
        if key == "tls" and isinstance(value, dict):
            found.append(((*loc, key), value))
        else:
            found.extend(_tls_blocks(value, (*loc, key)))
    return found
