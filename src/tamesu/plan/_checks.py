"""What is checked of each planned test beyond its schema: something plays the user, a counterpart exists,
the models a judge or an extraction needs are configured."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from tamesu import checks, packs, plugins, targets
from tamesu.checks import similar
from tamesu.errors import Problem
from tamesu.models.spec import ModelSpec
from tamesu.plan.model import LoadedSuite
from tamesu.suite.problems import problems_from
from tamesu.suite.schema import TestSpec
from tamesu.suite.yaml_reader import Document
from tamesu.targets.base import StepContext
from tamesu.types import binds_clash


def check_audio(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...], problems: list[Problem],
    warnings: list[Problem],
) -> None:
    """A persona's voice and behaviours only mean something on a target that speaks; a dtmf step needs a
    protocol that carries digits; a voice must be one installed here."""
    target = suite.targets.get(spec.target)
    if target is None:
        return
    kind = target.type
    persona = spec.persona
    cls = targets.target_class(kind)
    if not cls.has_audio(target):
        why = f"{kind} target {spec.target} has no audio" + (" (mode: text)" if cls.text_mode else "")
        if persona is not None and persona.voice is not None:
            warnings.append(doc.problem((*loc, "persona", "voice"), f"{why}: the voice is not used"))
        if persona is not None and persona.behaviors.model_fields_set:
            for name in sorted(persona.behaviors.model_fields_set):
                warnings.append(doc.problem((*loc, "persona", "behaviors", name),
                                            f"{why}: {name} does nothing here"))
    elif persona is not None and persona.voice is not None:
        from tamesu.audio import voices

        if voices.find(persona.voice) is None:
            problems.append(doc.problem((*loc, "persona", "voice"), voices.unknown_message(persona.voice)))
    if not cls.sends_dtmf(target):
        for i, step in enumerate(spec.scenario.script):
            if step.dtmf:
                problems.append(doc.problem(
                    (*loc, "scenario", "script", i, "dtmf"),
                    f"{kind} target {spec.target} cannot send DTMF digits "
                    + (f"(it has no {cls.dtmf_needs})" if cls.dtmf else
                       f"(targets that can: {', '.join(targets.dtmf_types())})")))


def check_user_side(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...], problems: list[Problem],
    warnings: list[Problem],
) -> None:
    """Something must play the user: script steps, or a simulator model with a goal, or a counterpart. A goal or
    a persona beside a script with no simulator model is played by nothing: said where written."""
    if spec.skip or spec.steps:
        return
    scenario = spec.scenario
    if spec.counterpart is not None:
        if scenario.attack is not None:
            problems.append(doc.problem((*loc, "scenario", "attack"), "a counterpart plays the user in this "
                                        "test, so nothing would attack: drop counterpart or scenario.attack"))
        _check_counterpart(suite, spec, doc, loc, problems)
        return
    has_simulator = "simulator" in suite.spec.models or "simulator" in suite.project.spec.models
    if scenario.attack is not None and not has_simulator:
        problems.append(doc.problem((*loc, "scenario", "attack"), "an attack is played by the simulated user: "
                                    "set models.simulator in tamesu.yaml or the suite"))
        return
    if scenario.stop_when and not (has_simulator and (scenario.goal or spec.persona or scenario.attack)):
        # the simulator judges stop_when; a script alone (or no simulator model) says its steps and ends: ignored
        problems.append(doc.problem((*loc, "scenario", "stop_when"), "nothing would judge stop_when: the simulated "
                                    "user does, and it plays only with scenario.goal, a persona or scenario.attack "
                                    "and models.simulator (a script alone ends after its steps)"))
    if scenario.script and not has_simulator:
        if scenario.goal or spec.persona is not None:  # most scripted tests have neither: no call (test_turn_calls)
            warnings.extend(_unplayed(spec, doc, loc))
        return
    if not has_simulator:
        problems.append(doc.problem((*loc, "scenario") if "scenario" in doc_keys(doc, loc) else loc,
                                    "nothing plays the user: add scenario.script steps, or set models.simulator "
                                    "so the persona can speak"))
    elif not scenario.goal and not scenario.script and scenario.attack is None:
        problems.append(doc.problem((*loc, "scenario") if "scenario" in doc_keys(doc, loc) else loc,
                                    "the simulated user needs scenario.goal (or scenario.script steps)"))


_SIMULATOR_ONLY = ("name", "style", "language", "background", "facts")
"""The persona's keys only the simulated user reads (voice and behaviors are the script's too, on audio targets)."""


def _unplayed(spec: TestSpec, doc: Document, loc: tuple[object, ...]) -> list[Problem]:
    """A script with no simulator model says its steps and ends: the test's goal and the persona's words for the
    simulated user are read by nothing (the run passed on the script alone, and said nothing of them)."""
    said: list[Problem] = []
    why = ("no models.simulator (tamesu.yaml or the suite) plays the user, so the script's steps are said and the "
           "run ends")
    if spec.scenario.goal:
        said.append(doc.problem((*loc, "scenario", "goal"), f"the goal is not used: {why}"))
    persona = spec.persona
    unread = [key for key in _SIMULATOR_ONLY if persona is not None and key in persona.model_fields_set]
    if unread:
        said.append(doc.problem((*loc, "persona", unread[0]) if len(unread) == 1 else (*loc, "persona"),
                                f"{', '.join(unread)}: only the simulated user reads "
                                f"{'it' if len(unread) == 1 else 'them'}, and {why}"))
    return said


def check_steps(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...], problems: list[Problem]
) -> None:
    """A test's `steps`, checked by its target's class when the type takes steps (a browser's). A target whose
    own keys are wrong (said where they are) still has its tests' steps checked: every problem at once."""
    target = suite.targets.get(spec.target)
    raw = suite.spec.targets.get(spec.target) if spec.target else None
    kind = target.type if target is not None else raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str) or not targets.is_known(kind):
        return
    try:
        cls = targets.target_class(kind)
    except plugins.PluginError:
        return  # said where the target's type is
    if not cls.takes_steps:
        if spec.steps:
            problems.append(doc.problem((*loc, "steps"), f"steps are for browser targets; this test's target is "
                                                         f"{kind} (use scenario.script)"))
        return
    context = StepContext(
        models={*suite.spec.models, *suite.project.spec.models}, problem_at=doc.problem,
        from_validation=lambda exc, model, where: problems_from(exc, doc, model, where, owner="step"),
        has_conversation=bool(spec.scenario.script or spec.persona or spec.counterpart or spec.scenario.goal),
        suite_dir=suite.dir, target_name=spec.target)
    for problem in cls.step_problems(spec.steps, loc, target, context):
        if problem not in problems:  # a target's own problem is the same for each of its tests
            problems.append(problem)


def no_target(name: str, targets: list[str]) -> str:
    """A test's (or a counterpart's) target that is not the suite's, with the one it may have meant."""
    close = difflib.get_close_matches(name, targets, n=1)
    meant = f"did you mean {close[0]!r}? " if close else ""
    return f"no target named {name!r} ({meant}targets: {', '.join(targets) or 'none declared'})"


def _check_counterpart(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...], problems: list[Problem]
) -> None:
    """The counterpart is a target of the suite, and it has something to start from."""
    counterpart = spec.counterpart
    assert counterpart is not None
    where = (*loc, "counterpart", "target")
    if counterpart.target not in suite.spec.targets:
        problems.append(doc.problem(where, no_target(counterpart.target, list(suite.spec.targets))))
    elif (why := _cannot_talk(suite, counterpart.target, doc, where)) is not None:
        problems.append(doc.problem(where, why))
    elif spec.target in suite.targets and (clash := _same_port(suite, spec.target, counterpart.target)):
        # both open for the whole run: the second listener could never bind the address the first holds
        theirs, ours = clash
        how = "as the test's target {0} does" if theirs == ours else "where the test's target {0} binds " + ours
        problems.append(doc.problem(where, f"the counterpart {counterpart.target} binds {theirs} "
                                           f"{how.format(spec.target)}: both listen for the whole run, "
                                           "so give one of them another port (or none: a free one)"))
    if counterpart.opening is None and not spec.scenario.goal:
        problems.append(doc.problem((*loc, "counterpart"), "the counterpart needs an opening, or scenario.goal "
                                    "to answer first"))


def _same_port(suite: LoadedSuite, target: str, counterpart: str) -> tuple[str, str] | None:
    """The first address the counterpart's target binds that the test's target binds too (the counterpart's, then
    the target's, as written), compared as the machine binds them, not as strings."""
    ours = sorted(suite.targets[target].fixed_addrs())
    theirs = sorted(suite.targets[counterpart].fixed_addrs())
    return next(((their, our) for their in theirs for our in ours if binds_clash(their, our)), None)


def _cannot_talk(suite: LoadedSuite, name: str, doc: Document, where: tuple[object, ...]) -> str | None:
    """Why target `name` cannot play the user, or None: a type that takes steps (a browser) says, asked as for a
    test of no steps, whether this configuration can hold a conversation; only what it says of that counts."""
    target = suite.targets.get(name)
    if target is None or not targets.is_known(target.type):
        return None
    try:
        cls = targets.target_class(target.type)
    except plugins.PluginError:
        return None  # said where the target's type is
    if not cls.takes_steps:
        return None
    said: list[str] = []

    def problem_at(at: tuple[object, ...], message: str, **keys: Any) -> Problem:
        if at == where:
            said.append(message)
        return doc.problem(at, message, **keys)

    context = StepContext(models={*suite.spec.models, *suite.project.spec.models}, problem_at=problem_at,
                          from_validation=lambda *_: [], has_conversation=True, suite_dir=suite.dir,
                          target_name=name)
    cls.step_problems([], where, target, context)
    return f"{target.type} target {name} cannot play the user: {said[0]}" if said else None


_JUDGED = {"judge", "grounded"}


def check_models_needed(
    suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...], problems: list[Problem]
) -> None:
    """A judge, a golden file judged by a model, or an extracted capture need models.judge (or a `model:`)."""
    configured = {**suite.project.spec.models, **suite.spec.models}
    _check_embedding_models(configured, spec, doc, loc, problems)
    for i, entry in enumerate(spec.assert_):
        # a check's own `model:` naming no model (it was exit 3 at the run's first judge, validate said ok)
        key = next((k for k in entry if k not in checks.META_KEYS), None) if isinstance(entry, dict) else None
        options = entry.get(key) if isinstance(entry, dict) and key else None
        named = options.get("model") if isinstance(options, dict) else None
        if isinstance(named, str) and ":" not in named and named not in configured:
            problems.append(doc.problem((*loc, "assert", i, key, "model"), f"no model named {named!r} under "
                                        f"models: ({', '.join(configured) or 'none'}; or write provider:model)"))
    if "judge" in configured or "extract" in configured:
        return
    for i, entry in enumerate(spec.assert_):
        if not isinstance(entry, dict):
            continue
        key = next((k for k in entry if k not in checks.META_KEYS), None)
        options = entry.get(key) if key else None
        own_model = isinstance(options, dict) and options.get("model") is not None
        judged = key in _JUDGED or (isinstance(options, dict) and (
            (key == "golden" and options.get("mode") == "judge") or (key == "handoff" and options.get("summary")))) \
            or (key == "pack" and packs.needs_judge(entry, suite.packs))
        if judged and not own_model:
            problems.append(doc.problem((*loc, "assert", i, key), f"{key} needs a model: set models.judge in "
                                        "tamesu.yaml or the suite, or give this assertion a model:", key=True))
    for i, capture in enumerate(spec.capture):
        if capture.extract is not None and "judge" not in configured:
            problems.append(doc.problem((*loc, "capture", i, "extract"), "extract needs a model: set models.judge "
                                        "(or models.extract) in tamesu.yaml or the suite", key=True))


def _check_embedding_models(configured: Mapping[str, ModelSpec], spec: TestSpec, doc: Document,
                            loc: tuple[object, ...], problems: list[Problem]) -> None:
    """`similar_to` with `method: embedding` names a model that has an embeddings API, or one this machine runs."""
    for i, entry in enumerate(spec.assert_):
        options = entry.get("similar_to") if isinstance(entry, dict) else None
        if not isinstance(options, dict) or options.get("method") != "embedding" or "embedding_model" not in options:
            continue
        name = options["embedding_model"]
        named = configured.get(name) if isinstance(name, str) else None
        where = (*loc, "assert", i, "similar_to", "embedding_model")
        if named is not None and named.provider == "anthropic":
            problems.append(doc.problem(where, f"models.{name} is an anthropic model, and Anthropic's API has no "
                                        "embeddings: name an openai, azure or fake model"))
        elif named is None and not similar.embeddings_available():
            problems.append(doc.problem(where, f"{name!r} is not a model under models:, and a sentence-transformers "
                                        "model needs the optional extra tamesu[embeddings]"))


def check_named_agents(suite: LoadedSuite, spec: TestSpec, doc: Document, loc: tuple[object, ...],
                       problems: list[Problem]) -> None:
    """`delegated_to` names a remote agent of the suite, and `fuzz_tools` a tool the target can call: a misspelt
    name would never match, so "billing is down" would pass with billing answering."""
    remote = set(suite.spec.remote_agents)
    declared = ", ".join(sorted(remote)) or "none declared"
    for i, entry in enumerate(spec.assert_):
        named = entry.get("delegated_to") if isinstance(entry, dict) else None
        agent = named.get("agent") if isinstance(named, dict) else named
        if isinstance(agent, str) and "{{" not in agent and agent not in remote:
            problems.append(doc.problem((*loc, "assert", i, "delegated_to"), f"delegated_to names {agent!r}, which is "
                                        f"not a remote agent of the suite (remote_agents: {declared})"))
    target = suite.targets.get(spec.target or "")
    if target is None:
        return
    known = _known_tools(target)
    if known is None:
        return  # tools the target learns as it runs (an MCP server's): checked when it lists them
    for name in spec.fuzz_tools:
        if name not in remote and name not in known:
            tools = ", ".join(sorted(known | remote)) or "none"
            problems.append(doc.problem((*loc, "fuzz_tools", name), f"fuzz_tools names {name!r}, which this test's "
                                        f"target cannot call (its tools and the suite's remote agents: {tools})",
                                        key=True))


def check_remote_ports(suite: LoadedSuite, spec: TestSpec, doc: Document, problems: list[Problem]) -> None:
    """A remote agent's fixed `addr` that another remote agent, the test's target or its counterpart's binds too:
    all listen for the whole run, so the second could never bind it (exit 3, "Address already in use", every
    run). Said at the remote agent's addr, once however many tests meet it."""
    pinned = [(name, agent.addr) for name, agent in suite.spec.remote_agents.items() if agent.addr]
    names = [spec.target] + ([spec.counterpart.target] if spec.counterpart else [])
    others = [(f"target {name}", addr) for name in dict.fromkeys(names) if name in suite.targets
              for addr in sorted(suite.targets[name].fixed_addrs())]
    for index, (name, addr) in enumerate(pinned):
        for other, theirs in [*((f"remote agent {n}", a) for n, a in pinned[:index]), *others]:
            if binds_clash(addr, theirs):
                problem = doc.problem(("remote_agents", name, "addr"), f"the remote agent {name} binds {addr} where "
                                      f"{other} binds {theirs}: both listen for the whole run, so give one of them "
                                      "another port (or none: a free one)")
                if problem not in problems:
                    problems.append(problem)
                break


def _known_tools(target: Any) -> set[str] | None:
    """The tools a target can call, when the suite says them all: none but the remote agents for one that reports
    no tool calls (an A2A agent's are its delegations), a model target's declared tools; None when not known."""
    if not targets.target_class(target.type).reports_tool_calls:
        return set()
    if target.type == "model" and not getattr(target, "mcp", None):
        return {tool.name for tool in getattr(target, "tools", [])}
    return None


def doc_keys(doc: Document, loc: tuple[Any, ...]) -> set[str]:
    node: Any = doc.data
    for part in loc:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return set()
    return set(node) if isinstance(node, dict) else set()


_PROMPTED = ("model", "mcp")
"""Target types that prompt a model themselves: their `model`, `fallback` and `system_file` are checked here."""


def check_prompted_targets(suite: LoadedSuite, problems: list[Problem]) -> None:
    """A model or mcp target's `model` or `fallback` naming no model, or a `system_file` that is not there: a
    suite error where it is written (validate said ok; the run was exit 3 at each test, an mcp server started
    first)."""
    configured = {**suite.project.spec.models, **suite.spec.models}
    written = suite.doc.data.get("targets") if isinstance(suite.doc.data, dict) else None
    for name, raw in (written if isinstance(written, dict) else {}).items():  # tamesu.yaml's: said by `test -n`
        if not isinstance(raw, dict) or raw.get("type") not in _PROMPTED:
            continue
        for key in ("model", "fallback"):
            named = raw.get(key, "target" if key == "model" else None)
            if isinstance(named, str) and ":" not in named and "{{" not in named and named not in configured:
                said = "" if key in raw else " (a model or mcp target without model: uses models.target)"
                problems.append(suite.doc.problem(("targets", name, key) if key in raw else ("targets", name),
                                                  f"no model named {named!r} under models: "
                                                  f"({', '.join(configured) or 'none'}; or write provider:model)"
                                                  f"{said}"))
        prompt = raw.get("system_file")
        if isinstance(prompt, str) and "{{" not in prompt and not (suite.dir / prompt).is_file():
            problems.append(suite.doc.problem(("targets", name, "system_file"),
                                              f"no file {suite.dir / prompt} (system_file is read from the "
                                              "suite's folder)"))
