"""Installed plug-ins that are broken: an entry point whose module is missing, or that names something of the
wrong shape. The package is laid out on disk as pip leaves one (a module and its `.dist-info` with
`entry_points.txt`), found through PYTHONPATH as any installed distribution is; the dev venv never sees it."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from conftest import run_tamesu

MODULE = '''\
"""A plug-in whose entries are half right: the working ones beside the broken ones."""
from tamesu import AgentTurn, Check, Provider, RunView, Session, Strict, Target, TargetSpec, UserTurn, Verdict

not_a_target = 42


def mentions(run: RunView, word: str, times: int = 1) -> bool:
    return run.agent_text().count(word) >= times


class Specless(Check):
    key = "specless"

    async def evaluate(self, run: RunView) -> Verdict:
        return Verdict(passed=True, reason="never reached")


class Undecided(Check):
    key = "undecided"
    Spec = Strict


class ExplodesSpec(Strict):
    pass


class Explodes(Check):
    key = "explodes"
    Spec = ExplodesSpec

    async def evaluate(self, run: RunView) -> Verdict:
        raise RuntimeError("the check's own bug")


class StumblesSpec(TargetSpec):
    pass


class Stumbles(Target):
    kind = "stumbles"
    Spec = StumblesSpec

    async def _open(self, session: Session) -> None:
        pass

    async def send(self, turn: UserTurn) -> AgentTurn:
        return {}["the target's own bug"]

    async def close(self) -> None:
        pass


class Mute(Target):
    kind = "mute"
    Spec = StumblesSpec

    async def _open(self, session: Session) -> None:
        pass

    async def close(self) -> None:
        pass


class Loose(Stumbles):
    kind = "loose"
    Spec = dict


class Wordy(Stumbles):
    kind = "wordy"

    async def send(self, turn: UserTurn) -> AgentTurn:
        return "just words"  # type: ignore[return-value]  # the plug-in's bug under test


class Parrot(Stumbles):
    kind = "parrot"

    async def send(self, turn: UserTurn) -> AgentTurn:
        session = self._require_session()
        sent = session.now_ms()
        return AgentTurn(text=turn.text, response={"text": turn.text}, sent_at_ms=sent,
                         completed_at_ms=session.now_ms())


def one_line(run):
    raise AssertionError("never called: it takes the run alone, not (run, path, comparison)")


class Silent(Provider):
    name = "silent"


class KindSpec(Strict):
    word: str = "please"


class Kind(Check):
    key = "kind"
    Spec = KindSpec

    async def evaluate(self, run: RunView) -> Verdict:
        return Verdict(passed=self.spec.word in run.agent_text(), reason="looked")
'''

ENTRY_POINTS = """\
[tamesu.targets]
stumbles = tamesu_half_broken:Stumbles
parrot = tamesu_half_broken:Parrot
mute = tamesu_half_broken:Mute
loose = tamesu_half_broken:Loose
wordy = tamesu_half_broken:Wordy
gone = tamesu_half_broken_missing:Target
shapeless = tamesu_half_broken:not_a_target

[tamesu.checks]
contains = tamesu_half_broken:Kind
kind = tamesu_half_broken:Kind
explodes = tamesu_half_broken:Explodes
specless = tamesu_half_broken:Specless
undecided = tamesu_half_broken:Undecided
mentions = tamesu_half_broken:mentions
vanished = tamesu_half_broken_missing:check

[tamesu.reports]
oneline = tamesu_half_broken:one_line

[tamesu.providers]
vanished = tamesu_half_broken_missing:Provider
shapeless = tamesu_half_broken:not_a_target
silent = tamesu_half_broken:Silent
"""


@pytest.fixture
def broken_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "tamesu_half_broken-0.1.dist-info").mkdir(parents=True)
    (site / "tamesu_half_broken.py").write_text(MODULE)
    info = site / "tamesu_half_broken-0.1.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tamesu-half-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    other = site / "tamesu_other_kind-0.2.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: tamesu-other-kind\nVersion: 0.2\n")
    (other / "entry_points.txt").write_text("[tamesu.checks]\nkind = tamesu_half_broken:Kind\n")
    return site


def _with(site: Path) -> dict[str, str]:
    # beside a PYTHONPATH the tests already run with (a worktree's src), not instead of it
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def test_a_broken_plugin_costs_neither_init_nor_the_schema(broken_site: Path, tmp_path: Path) -> None:
    """Before, `tamesu init` and `tamesu schema` were `internal error: PluginError`, exit 3, on any machine where
    one installed plug-in did not load."""
    env = _with(broken_site)
    made = run_tamesu(["init", "project"], cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "internal error" not in made.stderr
    suite = json.loads((tmp_path / "project" / ".tamesu" / "schema" / "suite.schema.json").read_text())
    branches = suite["$defs"]["Assertion"]["oneOf"]
    keys = {key for branch in branches for key in branch["required"]}
    assert "kind" in keys and "contains" in keys and "vanished" not in keys  # the plug-in's working check stays
    assert suite["$defs"]["Target"]["properties"]["type"]["enum"].count("rest") == 1
    assert "gone" not in suite["$defs"]["Target"]["properties"]["type"]["enum"]
    # each plug-in left out is said once, with why
    warned = [line for line in made.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 7, made.stderr
    assert any("tamesu.targets:gone" in line and "ModuleNotFoundError" in line and "left out of the schema" in line
               for line in warned)
    assert any("tamesu.targets:shapeless is not a Target class" in line for line in warned)
    assert any("tamesu.checks:vanished" in line for line in warned)
    printed = run_tamesu(["schema"], cwd=tmp_path, env=env)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["title"] == "tamesu suite"
    assert "tamesu.checks:vanished" in printed.stderr


def test_a_misspelt_assertion_key_is_a_suite_problem_beside_a_broken_plugin(broken_site: Path,
                                                                             tmp_path: Path) -> None:
    """The "did you mean" hint imported every plug-in's check: one that did not load made a typo an internal
    error naming a plug-in the suite never used."""
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: rest, url: "http://127.0.0.1:9/chat" }
        tests:
          - name: t
            target: bot
            scenario: { script: [ { say: "hi" } ] }
            assert: [ { kinf: please } ]
        """))
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=_with(broken_site))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "suite.yaml:7:17: tests[0].assert[0].kinf: unknown assertion 'kinf' (did you mean 'kind'?)" in (
        done.stderr.splitlines())
    assert "internal error" not in done.stderr


def test_a_model_provider_plugin_that_does_not_load_is_a_problem_where_the_suite_names_it(
        broken_site: Path, tmp_path: Path) -> None:
    """As a plug-in's target or check is. Before, `validate` said ok and every test of a model target on it was an
    error at run time, exit 3 (`the model call failed: ... cannot be loaded`)."""
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        models:
          gone: { provider: vanished, model: m1 }
          odd: "shapeless:m2"
          mum: { provider: silent, model: m3 }
        targets:
          bot: { type: model, model: gone, system: "You answer." }
        tests:
          - name: t
            target: bot
            scenario: { script: [ { say: "hi" } ] }
        """))
    env = _with(broken_site)
    for command in (["validate", "suite.yaml"], ["run", "suite.yaml", "--out", "out"]):
        done = run_tamesu(command, cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.splitlines()
        assert ("suite.yaml:2:21: models.gone.provider: plug-in tamesu.providers:vanished "
                "(tamesu_half_broken_missing:Provider, from tamesu-half-broken) cannot be loaded: "
                "ModuleNotFoundError: No module named 'tamesu_half_broken_missing'") in lines, done.stderr
        assert "suite.yaml:3:8: models.odd.provider: plug-in tamesu.providers:shapeless is not a Provider class" in (
            lines), done.stderr
        # a Provider class that leaves `generate` out: each model call was `internal error: TypeError: Can't
        # instantiate abstract class`
        assert "suite.yaml:4:20: models.mum.provider: plug-in tamesu.providers:silent does not implement generate" in (
            lines), done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_a_custom_function_whose_parameters_do_not_fit_its_with_is_refused_where_written(
        broken_site: Path, tmp_path: Path) -> None:
    """A plug-in's function or the project's, for `custom` and `script`. Before, `validate` said ok and every run
    was an error (`custom mentions raised TypeError: mentions() missing 1 required positional argument`, exit 3,
    `fault: environment`)."""
    (tmp_path / "project_checks.py").write_text(textwrap.dedent("""\
        def has_reference(run, prefix="EXP-"):
            return prefix in run.agent_text()


        def two(run, other):
            return True
        """))
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: rest, url: "http://127.0.0.1:9/chat" }
        tests:
          - name: t
            target: bot
            scenario: { script: [ { say: "hi" } ] }
            assert:
              - custom: { name: mentions }
              - custom: { name: mentions, with: { word: hi, time: 2 } }
              - custom: { name: mentions, with: { word: hi, times: 2 } }
              - custom: { function: "project_checks:has_reference", with: { prefix: "INV-" } }
              - custom: { function: "project_checks:has_reference", with: { prefx: "INV-" } }
              - script: project_checks:two
              - script: project_checks:has_reference
        """))
    env = _with(broken_site)
    for command in (["validate", "suite.yaml"], ["run", "suite.yaml", "--out", "out"]):
        done = run_tamesu(command, cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.splitlines() == [
            "suite.yaml:8:17: tests[0].assert[0].custom: custom mentions: mentions(run, word, times=1) cannot be "
            "called with the run alone (no with:): missing a required argument: 'word'",
            "suite.yaml:9:17: tests[0].assert[1].custom: custom mentions: mentions(run, word, times=1) cannot be "
            "called with the run and with: {word, time}: got an unexpected keyword argument 'time'",
            "suite.yaml:12:17: tests[0].assert[4].custom: custom project_checks:has_reference: "
            "has_reference(run, prefix='EXP-') cannot be called with the run and with: {prefx}: got an unexpected "
            "keyword argument 'prefx'",
            "suite.yaml:13:17: tests[0].assert[5].script: script project_checks:two: two(run, other) cannot be "
            "called with one argument, the run: missing a required argument: 'other'",
            "4 problems found",
        ], done.stderr


def test_doctor_lists_the_plugins_and_says_which_names_are_never_used(broken_site: Path, tmp_path: Path) -> None:
    """A plug-in's name that is a built-in's (or that another package claimed first) is never what a suite gets.
    Before, nothing said so: the plug-in's author saw the built-in `contains` run instead of theirs."""
    done = run_tamesu(["doctor"], cwd=tmp_path, env=_with(broken_site))
    lines = [line for line in done.stdout.splitlines() if "plug-in" in line]
    assert ("ok    plug-in tamesu-half-broken 0.1: targets gone, loose, mute, parrot, shapeless, stumbles, wordy; "
            "checks contains, explodes, kind, mentions, specless, undecided, vanished; providers shapeless, silent, "
            "vanished; reports oneline") in lines, done.stdout
    assert "ok    plug-in tamesu-other-kind 0.2: checks kind" in lines, done.stdout
    assert ("warn  plug-in tamesu-half-broken 0.1: tamesu.checks:contains is never used: contains is tamesu's own, "
            "and a built-in name wins") in lines, done.stdout
    # which of the two packages claims `kind` first is the order Python lists them in: the other one is said
    second = [line for line in lines if "tamesu.checks:kind is never used" in line]
    assert len(second) == 1 and second[0].endswith("claims the name first"), lines
    assert len(lines) == 4, lines


def test_a_report_writer_that_cannot_take_run_path_comparison_is_refused_before_the_run(
        broken_site: Path, tmp_path: Path) -> None:
    """Before, every test ran and only then `error: the oneline report failed: TypeError: one_line() takes 1
    positional argument but 3 were given`, exit 3."""
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: rest, url: "http://127.0.0.1:9/chat" }
        tests:
          - name: t
            target: bot
            scenario: { script: [ { say: "hi" } ] }
        """))
    said = ("plug-in tamesu.reports:oneline: its writer one_line(run) cannot be called with (run, path, comparison): "
            "too many positional arguments")
    env = _with(broken_site)
    done = run_tamesu(["run", "suite.yaml", "--out", "out", "--report", "oneline"], cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"--report: {said}"]
    (tmp_path / "tamesu.yaml").write_text("report: [junit, oneline]\n")
    checked = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=env)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert f"tamesu.yaml:1:17: report[1]: {said}" in checked.stderr.splitlines()
    assert not (tmp_path / "out").exists()  # nothing ran


def test_what_a_plugin_lets_escape_is_said_to_be_the_plugins_not_an_internal_error(
        broken_site: Path, tmp_path: Path) -> None:
    """A plug-in target's `send` or a plug-in check's `evaluate` that raises: that test's error, naming the plug-in
    package. Before, `internal error: KeyError: ...`: tamesu blamed itself for its plug-in's bug."""
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: stumbles }
          fine: { type: parrot }
        tests:
          - name: target
            target: bot
            scenario: { script: [ { say: "hi" } ] }
          - name: check
            target: fine
            scenario: { script: [ { say: "hi" } ] }
            assert: [ { contains: hi }, { explodes: {} } ]
          - name: not a turn
            target: words
            scenario: { script: [ { say: "hi" } ] }
        """).replace("  fine: { type: parrot }\n", "  fine: { type: parrot }\n  words: { type: wordy }\n"))
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env=_with(broken_site))
    assert done.returncode == 3, done.stdout + done.stderr
    assert ("! plug-in tamesu-half-broken 0.1 raised KeyError: \"the target's own bug\" (traceback in "
            "run-1/traceback.txt)") in done.stdout, done.stdout
    assert ("! explodes: plug-in tamesu-half-broken 0.1 raised RuntimeError: the check's own bug (traceback in "
            "run-1/traceback.txt)") in done.stdout, done.stdout
    # a send that returns no AgentTurn: before, `internal error: AttributeError: 'str' object has no attribute
    # 'trace_id'`
    assert ("! the wordy target (plug-in tamesu-half-broken 0.1) answered a turn with str, not an AgentTurn"
            ) in done.stdout, done.stdout
    assert "internal error" not in done.stdout + done.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert "tamesu_half_broken.py" in (run_dir / "suite" / "target" / "run-1" / "traceback.txt").read_text()


def test_a_plugin_check_of_the_wrong_shape_or_a_function_written_as_a_key_is_one_line(
        broken_site: Path, tmp_path: Path) -> None:
    """Before, a Check class without a Spec was `internal error: AttributeError: type object 'Specless' has no
    attribute 'Spec'` (exit 3) wherever it was named, and a plug-in's function written as a key was `unknown
    assertion 'mentions'`, though it is installed."""
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: parrot }
        tests:
          - name: t
            target: bot
            scenario: { script: [ { say: "hi" } ] }
            assert:
              - specless: {}
              - custom: { name: specless }
              - mentions: { word: hi }
              - undecided: {}
        """))
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=_with(broken_site))
    assert done.returncode == 2, done.stdout + done.stderr
    specless = ("plug-in tamesu.checks:specless is a Check class without a Spec (a pydantic model of its options, "
                "such as a tamesu.Strict subclass)")
    assert done.stderr.splitlines() == [
        f"suite.yaml:8:9: tests[0].assert[0].specless: {specless}",
        f"suite.yaml:9:17: tests[0].assert[1].custom: {specless}",
        "suite.yaml:10:9: tests[0].assert[2].mentions: 'mentions' is a plug-in's function, not an assertion key: "
        "write custom: {name: mentions, with: {...}}",
        # a Check class that leaves `evaluate` out: `internal error: TypeError: Can't instantiate abstract class`
        "suite.yaml:11:9: tests[0].assert[3].undecided: plug-in tamesu.checks:undecided does not implement evaluate",
        "4 problems found",
    ], done.stderr


def test_a_plugin_target_class_of_the_wrong_shape_is_one_line_where_the_suite_names_it(
        broken_site: Path, tmp_path: Path) -> None:
    """A Target subclass whose Spec is not a TargetSpec, or that leaves `send` out. Before, the first was
    `internal error: AttributeError: type object 'dict' has no attribute 'model_fields'` (exit 3) in `validate`,
    `run`, `init` and `schema`."""
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          quiet: { type: mute }
          loose: { type: loose }
        tests:
          - name: t
            target: quiet
            scenario: { script: [ { say: "hi" } ] }
          - name: u
            target: loose
            scenario: { script: [ { say: "hi" } ] }
        """))
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=_with(broken_site))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "suite.yaml:2:18: targets.quiet.type: plug-in tamesu.targets:mute does not implement send",
        "suite.yaml:3:18: targets.loose.type: plug-in tamesu.targets:loose: its Spec is not a TargetSpec subclass (a "
        "pydantic model of its keys)",
        "2 problems found",
    ], done.stderr


def test_the_names_a_hint_offers_leave_out_the_plugins_that_cannot_load(broken_site: Path, tmp_path: Path) -> None:
    """Before, "unknown target type ... (one of ...)" offered gone, loose, mute and shapeless, "unknown model
    provider" shapeless, silent and vanished, and `custom`'s "registered:" specless, undecided and vanished: names
    that, once written, are refused as broken."""
    (tmp_path / "models.yaml").write_text(textwrap.dedent("""\
        models:
          m: { provider: opnai, model: x }
        targets:
          bot: { type: model, model: m }
        tests:
          - { name: t, target: bot, scenario: { script: [ { say: "hi" } ] } }
        """))
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: rset, url: "http://127.0.0.1:9/chat" }
          fine: { type: parrot }
        tests:
          - name: t
            target: fine
            scenario: { script: [ { say: "hi" } ] }
            assert: [ { custom: { name: zzz } } ]
        """))
    done = run_tamesu(["validate", "models.yaml"], cwd=tmp_path, env=_with(broken_site))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "models.yaml:2:18: models.m.provider: unknown model provider 'opnai' (one of anthropic, azure, fake, openai)",
        "1 problem found"], done.stderr
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=_with(broken_site))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "suite.yaml:2:16: targets.bot.type: unknown target type 'rset' (one of a2a, browser, grpc, livekit, mcp, "
        "model, parrot, pipecat, realtime, rest, sip, stumbles, twilio, voice, wordy)",
        "suite.yaml:8:25: tests[0].assert[0].custom: no check registered as 'zzz' (registered: explodes, kind, "
        "mentions)",
        "2 problems found"], done.stderr
