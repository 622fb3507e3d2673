"""A third-party plug-in package (tests/fixtures/plugin_demo) built and pip-installed into a folder of its own,
then used from a suite by `tamesu run` with that folder on its path: its target type, its check (as a key and
through `custom: {name: ...}`), its report format and its model provider. The dev venv never sees it."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import forked
import tamesu
from conftest import run_tamesu

FIXTURE = Path(__file__).parent / "fixtures" / "plugin_demo"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plug-in installed with pip into a folder (`--target`), offline; built from a copy so the fixture
    folder stays clean. Built once per run: the xdist workers share the session's temporary folder, and the
    first to take the lock builds it (a build is some 3 s of CPU, and it took 20 s on each loaded worker)."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("building the plug-in package needs setuptools in the test venv")
    here = tmp_path_factory.getbasetemp()
    shared = (here.parent if os.environ.get("PYTEST_XDIST_WORKER") else here) / f"plugin-{_source_hash()}"
    shared.mkdir(exist_ok=True)
    site = shared / "site"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes: the other worker waits for the build
        if not (shared / "built").exists():
            _build(shared / "source", site)
            (shared / "built").touch()
    assert list(site.glob("tamesu_plugin_demo-*.dist-info/entry_points.txt"))
    return site


def _source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(FIXTURE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and "build" not in path.parts:
            digest.update(str(path.relative_to(FIXTURE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _build(source: Path, site: Path) -> None:
    shutil.rmtree(source, ignore_errors=True)
    shutil.rmtree(site, ignore_errors=True)  # a build cut short before
    shutil.copytree(FIXTURE, source)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--no-build-isolation", "--disable-pip-version-check", "--target", str(site), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


SUITE = """\
targets:
  loud: { type: echo, prefix: "ECHO: ", shout: true }
  quiet: { type: echo }
tests:
  - name: shouts
    target: loud
    scenario: { script: [ { say: "hello there" } ] }
    assert:
      - shouty: { min_ratio: 0.9 }
      - custom: { name: mentions, with: { word: hello } }
      - custom: { name: shouty, with: { min_ratio: 0.5 } }
      - custom: shouty
      - metric: { name: echo_turns, equals: 1 }
  - name: whispers
    target: quiet
    scenario: { script: [ { say: "hello there" } ] }
    assert:
      - shouty: { min_ratio: 0.9 }
      - custom: { name: mentions, with: { word: hello, times: 2 } }
      - custom: shouty
  - name: plug-in breaks
    target: quiet
    scenario: { script: [ { say: "hi" } ] }
    assert: [ { custom: { name: mentions, with: { word: boom } } } ]
"""


def test_a_plugin_package_adds_a_target_a_check_and_a_report(plugin_site: Path, tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    env = {"PYTHONPATH": str(plugin_site)}
    done = run_tamesu(["run", "suite.yaml", "--out", "out", "--report", "plain,junit"], cwd=tmp_path, env=env)
    assert done.returncode == 3, done.stdout + done.stderr  # one test's check raised: that test is an error
    (run_dir,) = (p for p in (tmp_path / "out").iterdir() if p.is_dir())
    # the plug-in's report, at its default file in the run directory
    assert (run_dir / "plain.txt").read_text().splitlines() == [
        "suite/shouts passed", "suite/whispers failed", "suite/plug-in breaks error"]
    assert "plain report:" in done.stdout and (run_dir / "junit.xml").is_file()
    assert "mentions raised RuntimeError: the plug-in broke" in done.stdout
    assert "'hello' 1 time(s)" in done.stdout  # the whispers test's custom verdict, shown as its reason
    # `custom: shouty`, the Concepts page's "a registered assertion by name": its own default threshold
    # (the test's two `custom` are named by their place: assert[2] is `custom: shouty`)
    assert done.stdout.count("✗ assert[2]/custom: 0% capitals") == 1


def test_a_run_with_the_plugin_on_its_path_runs_the_tamesu_the_tests_import(plugin_site: Path, tmp_path: Path) -> None:
    # before: run_tamesu's PYTHONPATH replaced the one the tests ran with, so in a worktree (PYTHONPATH=<it>/src)
    # these runs ran the tamesu installed in the venv: another checkout's code was the one tested
    (tmp_path / "checks.py").write_text("import tamesu\n\ndef where(run):\n    return False, tamesu.__file__\n")
    (tmp_path / "suite.yaml").write_text("""\
targets: { quiet: { type: echo } }
tests: [ { name: t, target: quiet, scenario: { script: [ { say: hi } ] }, assert: [ { script: checks:where } ] } ]
""")
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"PYTHONPATH": str(plugin_site)})
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"✗ script: {tamesu.__file__}" in done.stdout, done.stdout


def test_a_record_that_cannot_be_written_is_that_tests_error_not_the_runs_end(plugin_site: Path,
                                                                             tmp_path: Path) -> None:
    # before: `tamesu: internal error: PydanticSerializationError: ... Maximum serialization depth exceeded`
    # ended the whole run when a target's answer was nested 900 levels deep; the tests after it never ran
    (tmp_path / "suite.yaml").write_text("""\
targets:
  quiet: { type: echo }
tests:
  - { name: deep, target: quiet, scenario: { script: [ { say: "nest deeply" } ] } }
  - { name: after, target: quiet, scenario: { script: [ { say: "hello" } ] }, assert: [ { contains: hello } ] }
""")
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"PYTHONPATH": str(plugin_site)})
    assert done.returncode == 3, done.stdout + done.stderr
    (run_dir,) = (p for p in (tmp_path / "out").iterdir() if p.is_dir())
    rows = {row["test"]: row for row in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {name: row["status"] for name, row in rows.items()} == {"deep": "error", "after": "passed"}
    assert "internal error: PydanticSerializationError" in rows["deep"]["runs"][0]["error"]
    assert json.loads((run_dir / "run.json").read_text())["counts"]["total"] == 2
    assert (run_dir / "suite" / "deep" / "run-1" / "traceback.txt").is_file()


def test_without_the_plugin_its_names_are_unknown(plugin_site: Path, tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown target type 'echo'" in done.stderr
    assert "unknown assertion 'shouty'" in done.stderr
    listed = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env={"PYTHONPATH": str(plugin_site)})
    assert listed.returncode == 0, listed.stderr
    assert "ok: 3 tests in 1 suite" in listed.stdout


def test_a_plugin_target_that_declares_no_metrics_leaves_its_suites_slos_to_the_run(plugin_site: Path,
                                                                                   tmp_path: Path) -> None:
    # the echo target has no `metric_names`: what it measures is known once it ran, so an SLO no built-in target
    # measures is not refused before (the end-of-run warning says it; a voice suite's is: tests/plan/test_slo_names.py)
    (tmp_path / "suite.yaml").write_text("targets: { quiet: { type: echo } }\ndefaults: { slo: { echo_turnz: 1 } }\n"
                                         "tests: [ { name: t, target: quiet, scenario: { script: [ {say: hi} ] } } ]\n")
    done = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env={"PYTHONPATH": str(plugin_site)})
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_plugin_report_in_tamesu_yaml_and_a_key_of_the_plugin_target(plugin_site: Path, tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text("report: [plain]\n")
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        targets:
          bot: { type: echo, shout: true, url: "http://127.0.0.1:9" }
        tests:
          - name: t
            target: bot
            scenario: { script: [ { say: "hi" } ] }
        """))
    env = {"PYTHONPATH": str(plugin_site)}
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env=env)
    # `url` is a key of other target types: a warning, not an error, for the plug-in's type too
    assert "'url' is a key of" in done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (p for p in (tmp_path / "out").iterdir() if p.is_dir())
    assert (run_dir / "plain.txt").read_text() == "suite/t passed\n"
    unknown = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown report 'plain'" in unknown.stderr


def test_a_plugin_model_provider_answers_a_model_target(plugin_site: Path, tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(textwrap.dedent("""\
        models:
          backwards: { provider: reverse, model: r1 }
        targets:
          bot: { type: model, model: backwards, system: "You answer." }
        tests:
          - name: reversed
            target: bot
            scenario: { script: [ { say: "stressed" } ] }
            assert: [ { equals: "desserts" } ]
        """))
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env={"PYTHONPATH": str(plugin_site)})
    assert done.returncode == 0, done.stdout + done.stderr
    without = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert without.returncode == 2 and "unknown model provider 'reverse'" in without.stderr


PHONE_SUITE = """\
targets:
  menu: { type: keypad }
  menu_text: { type: keypad, mode: text }
  loud: { type: echo }
tests:
  - name: presses two
    target: menu
    persona: { behaviors: { interrupt_probability: 0.3 } }
    scenario: { script: [ { say: "hello" }, { dtmf: "2" } ] }
    assert: [ { contains: "You pressed 2" }, { metric: { name: turns, equals: 2 } } ]
  - name: text mode
    target: menu_text
    persona: { behaviors: { interrupt_probability: 0.3 } }
    scenario: { script: [ { dtmf: "1" } ] }
    assert: [ { contains: "You pressed 1" } ]
"""


def test_a_plugin_target_declares_audio_and_dtmf_and_is_validated_and_run_like_a_built_in(
        plugin_site: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(plugin_site)}
    (tmp_path / "suite.yaml").write_text(PHONE_SUITE)
    checked = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    warnings = [line for line in checked.stderr.splitlines() if line.startswith("warning:")]
    # its `audio` and `text_mode` attributes: behaviours mean something in audio mode only
    assert warnings == ["warning: suite.yaml:13:52: tests[1].persona.behaviors.interrupt_probability: keypad "
                        "target menu_text has no audio (mode: text): interrupt_probability does nothing here"]
    done = run_tamesu(["run", "suite.yaml", "--out", "out"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    # a type without `dtmf` refuses the step, naming the built-in types that can
    (tmp_path / "suite.yaml").write_text(PHONE_SUITE.replace("target: menu_text", "target: loud"))
    refused = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert ("suite.yaml:14:35: tests[1].scenario.script[0].dtmf: echo target loud cannot send DTMF digits "
            "(targets that can: livekit, pipecat, sip, twilio, voice)") in refused.stderr.splitlines()
    assert "tests[0]" not in refused.stderr  # the keypad's own test stays valid


def test_the_plugin_imports_only_the_public_api() -> None:
    import ast

    import tamesu

    source = (FIXTURE / "tamesu_plugin_demo" / "__init__.py").read_text()
    imported = {(node.module, alias.name) for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tamesu")
                for alias in node.names}
    assert imported and {module for module, _ in imported} == {"tamesu"}
    assert {name for _, name in imported} <= set(tamesu.__all__)
    for name in tamesu.__all__:
        assert getattr(tamesu, name) is not None, name
    assert set(tamesu.__all__) == {"__version__", *tamesu._HOMES}  # each public name says where it lives


LISTED = """\
import json, sys
from tamesu import plugins
listed = {kind: plugins.built_in_names(kind) for kind in plugins.KINDS}
imported_early = sorted(m for m in sys.modules if m.startswith(("tamesu.targets.", "tamesu.checks.", "tamesu.report.")))
print(json.dumps({"listed": listed, "early": imported_early}))
"""
"""Run by a fresh interpreter: what listing the names imports is the point."""

BUILT_INS = """\
import importlib, json, pkgutil
from tamesu import plugins
listed = {kind: plugins.built_in_names(kind) for kind in plugins.KINDS}
loaded = {}
for kind, names in listed.items():
    for name in names:
        try:
            loaded[f"{kind}:{name}"] = type(plugins.load(kind, name)).__name__
        except ImportError:
            loaded[f"{kind}:{name}"] = "needs an extra"
# every module of the kinds' packages, imported: what registers itself is what the source scan found
homes = ["tamesu.targets", "tamesu.checks", "tamesu.models", "tamesu.report", "tamesu.evaluators"]
for home in homes:
    package = importlib.import_module(home)
    for info in pkgutil.walk_packages(package.__path__, home + "."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            pass
registered = {kind: sorted(plugins._registered[kind]) for kind in plugins.KINDS}
# a concrete target or check class that names its type or key but was never registered (a forgotten decorator)
from tamesu.checks.base import Check
from tamesu.targets.base import Target
def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)
unregistered = sorted(
    f"{c.__module__}.{c.__qualname__}" for base, kind, attr in ((Target, "targets", "kind"), (Check, "checks", "key"))
    for c in subclasses(base) if c.__module__.startswith("tamesu.") and attr in vars(c)
    and plugins._registered[kind].get(vars(c)[attr]) is not c)
print(json.dumps({"listed": listed, "loaded": loaded, "registered": registered, "unregistered": unregistered}))
"""
"""Run by a fork of the warm process (tests/forked.py), which has imported most of these modules and the model
SDKs: a fresh interpreter spent 2.1 s of CPU importing every module of the five packages. What registers itself
is the same either way (a module registers as it is imported, wherever that happened)."""


def test_every_built_in_is_found_without_importing_it_and_registers_itself(tmp_path: Path) -> None:
    import json

    listing = subprocess.run([sys.executable, "-c", LISTED], capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    first = json.loads(listing.stdout)
    assert first["early"] == []  # listing the names imported no target, check or report module
    (tmp_path / "built_ins.py").write_text(BUILT_INS)
    done = forked.run([], tmp_path, dict(os.environ), 120, script=str(tmp_path / "built_ins.py"))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    listed = found["listed"]
    assert listed == first["listed"]
    assert {"rest", "a2a", "sip", "livekit", "browser"} <= set(listed["targets"]) and len(listed["targets"]) == 12
    assert {"contains", "judge", "evaluator", "custom", "span"} <= set(listed["checks"]) and len(listed["checks"]) == 30
    assert sorted(listed["providers"]) == ["anthropic", "azure", "fake", "openai"]
    assert sorted(listed["reports"]) == ["github", "html", "json", "junit", "markdown"]
    assert sorted(listed["evaluators"]) == ["answer_relevancy", "faithfulness", "maliciousness"]
    assert found["loaded"]["targets:rest"] == "ABCMeta" and found["loaded"]["reports:junit"] == "function"
    for kind, names in listed.items():
        # a registration the source scan would miss (a decorator written another way) fails here
        importable = [n for n in names if found["loaded"][f"{kind}:{n}"] != "needs an extra"]
        assert set(importable) <= set(found["registered"][kind]) <= set(names), kind
    # the checks the engine builds itself (a JSONL checkpoint, a target validator, a negation), never a key a
    # user writes; any other unregistered class is a forgotten `@register`
    assert found["unregistered"] == ["tamesu.checks.checkpoint.CheckpointCheck", "tamesu.checks.negate.Negated",
                                     "tamesu.checks.target_validator.TargetValidator"]


def test_a_built_in_name_cannot_be_taken_by_another_module() -> None:
    from tamesu import plugins

    with pytest.raises(plugins.PluginError, match=r"tamesu.checks:contains is tamesu's own \(tamesu.checks.text\)"):
        plugins.register("checks", "contains")
    assert plugins.load("checks", "contains").__module__ == "tamesu.checks.text"
