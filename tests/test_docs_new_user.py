"""The pages a new user reads first, held to what the code does: getting started's first suite runs against the
example it names as the page says; the store page's `.gitignore` advice is the lines `tamesu init` writes (it said
to ignore `.tamesu/` whole, which keeps out the schemas the suites' first lines point editors at and the replay
cache CI replays); the run folders the concepts page names are the ones a run makes, the run's own folder named
as it says; the repeats page's
persona-facts examples are read by the audit as it says; the plug-in page names the file its demo report writes and the
keys `TargetSpec` brings; the persona keys' table names the noises, where the installed voices are listed and the
voice spoken without one; a persona nothing ends stops at `max_turns` as the models page says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agents.voice import needs_voice
from conftest import run_tamesu
from example_shop import example_shop
from tamesu.cli.scaffold import IGNORED

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_store_pages_gitignore_advice_is_what_init_writes() -> None:
    text = DOCS.joinpath("store.md").read_text(encoding="utf-8")
    advice = re.search(r"keep `([^`]+)` out of version control", text)
    assert advice, "the store page says what of .tamesu/ to keep out of git"
    assert advice.group(1) in IGNORED
    assert "add `.tamesu/` to your `.gitignore`" not in text


def test_the_run_folders_concepts_names_are_the_ones_a_run_makes() -> None:
    # a spoiled run made again with a new seed went into `run-1-rerun-2/`, a folder the page never named
    from tamesu.engine.repeats import run_dir_name

    text = DOCS.joinpath("concepts.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(run-N(?:-\w+-K)?)/`", text))
    made = {"run-N": run_dir_name(3), "run-N-retry-K": run_dir_name(3, attempt=2),
            "run-N-rerun-K": run_dir_name(3, rerun=1)}
    assert named == set(made), named
    for pattern, name in made.items():
        assert pattern.replace("N", "3").replace("K", "1") == name
    leaves = text.split("## What a run leaves behind", 1)[1]
    for file in ("plan.json", "results.jsonl", "run.json", "transcript.json", "result.json", "report.html"):
        assert file in leaves, file


def test_the_repeats_pages_persona_facts_examples_are_read_as_it_says() -> None:
    from tamesu.roles.audit import deterministic_finding

    text = DOCS.joinpath("repeats.md").read_text(encoding="utf-8")
    found = re.search(r"`([^`]+)` against `facts: \{(\w+): ([\w-]+)\}`; a line that does not name the fact, `([^`]+)`",
                      text)
    assert found, "the page shows a line the audit reads as contradicting a fact, and one it does not"
    contradicting, key, value, unnamed = found.groups()

    def said(line: str) -> object:
        return deterministic_finding([{"role": "user", "text": line, "turn": 1, "source": "simulator"}], {key: value})

    assert said(contradicting) is not None
    assert said(unnamed) is None


def test_the_first_suite_runs_against_the_example_as_the_page_says(tmp_path: Path) -> None:
    # the page showed a suite and named its example, but not how to run one against the other: SHOP_URL unset
    # and the SHOP_TOKEN secret the example never needs were two exit-2 problems for a reader who tried
    page = DOCS.joinpath("getting-started.md").read_text(encoding="utf-8")
    section = page.split("## A first suite", 1)[1].split("\n## ", 1)[0]
    suite = re.search(r"```yaml\n(.*?)```", section, re.S)
    command = re.search(r"\n((?:[A-Z_]+=\S+ )+)tamesu run suite\.yaml\n", section)
    assert suite and command, "the section's suite and the command that runs it"
    assert "python examples/rest-shop/agent.py --port 0" in section
    env = dict(pair.split("=", 1) for pair in command.group(1).split())
    assert set(env) == {"SHOP_URL", "SHOP_TOKEN"}, env
    with example_shop(tmp_path) as (_folder, url):
        (tmp_path / "suite.yaml").write_text(suite.group(1), encoding="utf-8")
        env["SHOP_URL"] = url  # the URL the agent printed, where the page writes http://127.0.0.1:PORT
        done = run_tamesu(["run", "suite.yaml", "--out", "out"], tmp_path, env={**env, "TAMESU_STORE": "off"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  suite/order status" in done.stdout


def test_the_plugin_pages_demo_report_file_and_target_keys_are_the_codes() -> None:
    # the page said `--report plain` writes `report.plain`: the demo it shows names `plain.txt` as its
    # default_file, and the keys TargetSpec brings left out `session`
    import ast

    from tamesu import TargetSpec

    text = DOCS.joinpath("plugins.md").read_text(encoding="utf-8")
    written = re.search(r"`tamesu run suite\.yaml --report plain` then writes `([^`]+)`", text)
    demo = DOCS.parent / "tests" / "fixtures" / "plugin_demo" / "tamesu_plugin_demo" / "__init__.py"
    named = [node.value.value for node in ast.walk(ast.parse(demo.read_text(encoding="utf-8")))
             if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
             and any(isinstance(t, ast.Attribute) and t.attr == "default_file" for t in node.targets)]
    assert written and named == [written.group(1)], (written, named)
    brings = re.search(r"deriving from `TargetSpec`, which brings\s+(.*?)\)", text, re.S)
    assert brings, "the page lists the keys TargetSpec brings"
    assert re.findall(r"`(\w+)`", brings.group(1)) == list(TargetSpec.model_fields)


def test_the_remote_agents_page_runs_its_example_with_the_token_the_example_asks_for() -> None:
    # the page showed the orchestrator suite and never said that an example of it runs offline, nor how
    import yaml

    text = DOCS.joinpath("remote-agents.md").read_text(encoding="utf-8")
    run = re.search(r"SHIPPING_AGENT_TOKEN=(\S+) python examples/orchestrator/agent\.py --port (\d+) &.*\n"
                    r"ORCHESTRATOR_URL=http://127\.0\.0\.1:(\d+)/a2a tamesu run examples/orchestrator\n", text)
    assert run and run.group(2) == run.group(3), "the page starts the example's orchestrator and runs its suite"
    suite = yaml.safe_load((DOCS.parent / "examples" / "orchestrator" / "orchestrator.tamesu.yaml").read_text())
    assert suite["vars"]["shipping_token"] == run.group(1)
    assert suite["remote_agents"]["shipping"]["token"] == "{{vars.shipping_token}}"


def test_the_persona_keys_say_where_voices_and_noises_are_named_as_the_code_does(tmp_path: Path) -> None:
    # the keys' table (docs/personas.md, from the schema's docstrings) sent a reader to `tamesu doctor` for the
    # installed voices and the noises: doctor lists neither. The unknown voice's error lists the voices
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    import docs_gen  # scripts/ is no package

    from tamesu.suite.audio_names import NOISES

    rows = {row.split(" | ")[0].strip("| `"): row for row in
            docs_gen.model_table("tamesu.suite.schema:Persona").splitlines()}
    noise, voice = rows["behaviors.background_noise.name"], rows["voice"]
    assert re.findall(r"`(\w+)`", noise.split(" | ")[-1]) == list(NOISES), noise
    assert "doctor" not in noise + voice
    (tmp_path / "s.yaml").write_text(
        "targets:\n  rt: { type: realtime, url: 'ws://127.0.0.1:9/v1/realtime', mode: audio }\n"
        "tests:\n  - name: t\n    persona: { voice: en-XX-nobody }\n    scenario: { script: [ { say: hi } ] }\n")
    done = run_tamesu(["validate", "s.yaml"], tmp_path)
    assert done.returncode == 2
    assert "tests[0].persona.voice: no voice 'en-XX-nobody' is installed (installed: " in done.stderr, done.stderr
    assert "one not installed is a suite error that lists those that are" in voice


@needs_voice
def test_the_persona_voice_default_is_said_where_a_user_looks_as_the_code_picks_it() -> None:
    # without persona.voice the user speaks with a voice no page named (the key's row said no default)
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    import docs_gen  # scripts/ is no package

    from tamesu.audio import voices

    picked = voices.default()
    assert picked is not None
    rows = {row.split(" | ")[0].strip("| `"): row for row in
            docs_gen.model_table("tamesu.suite.schema:Persona").splitlines()}
    assert f"default Piper's shipped `{picked.name}`" in rows["voice"], rows["voice"]
    page = " ".join(DOCS.joinpath("personas.md").read_text(encoding="utf-8").split())
    assert f"Without `persona.voice` (or without a persona) the user speaks with Piper's shipped `{picked.name}`" \
        in page

def test_the_run_folders_name_is_the_one_concepts_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the page said `tamesu-runs/<stamp>/` and never what a stamp is: local or UTC, how precise, what follows it
    import datetime as dt
    import time

    from tamesu.results.rundir import new_run_dir

    text = " ".join(DOCS.joinpath("concepts.md").read_text(encoding="utf-8").split("## What a run leaves behind",
                                                                                     1)[1].split())
    shown = re.search(r"in the machine's local time to the millisecond, then four random hex digits: `([^`]+)`", text)
    assert shown, "concepts.md says what a run folder's name is"
    monkeypatch.setenv("TZ", "Etc/GMT-9")  # nine hours ahead of UTC: local time is not UTC's here
    time.tzset()
    try:
        before = dt.datetime.now()
        made = new_run_dir(tmp_path).name
    finally:
        monkeypatch.undo()
        time.tzset()
    assert re.fullmatch(r"\d{8}-\d{6}-\d{3}-[0-9a-f]{4}", made) and re.fullmatch(r"\d{8}-\d{6}-\d{3}-[0-9a-f]{4}",
                                                                                  shown.group(1)), (made, shown)
    started = dt.datetime.strptime(made[:19], "%Y%m%d-%H%M%S-%f")
    assert abs((started - before).total_seconds()) < 5, (made, before)  # local time, as the page says

_ENDLESS = """
models:
  simulator: { provider: fake, rules: [ { when: ".", say: "Tell me more" } ] }
targets:
  shop: { type: rest, url: "{{env.SHOP_URL}}/chat", response: { text: $.reply } }
tests:
  - name: never done
    target: shop
    persona: { name: Dana }
    scenario: { goal: "Hear every order there is" }
"""


def test_a_persona_that_never_reaches_its_goal_ends_at_max_turns_as_models_md_says(tmp_path: Path) -> None:
    # what a persona test does when nothing ends it (no goal reached, no stop) was said nowhere: it ends at
    # max_turns, 10 by default, and passes unless an assertion says otherwise
    text = " ".join(DOCS.joinpath("models.md").read_text(encoding="utf-8").split())
    assert ("Without any of them the conversation ends at `scenario.max_turns` (default 10; `end_reason: max_turns` "
            "in `result.json`") in text
    assert "reaching it fails nothing by itself" in text
    with example_shop(tmp_path) as (_folder, url):
        (tmp_path / "suite.yaml").write_text(_ENDLESS, encoding="utf-8")
        done = run_tamesu(["run", "suite.yaml", "--out", "out"], tmp_path,
                          env={"SHOP_URL": url, "TAMESU_STORE": "off"})
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(next((tmp_path / "out").glob("*/suite/never-done/run-1/result.json")).read_text())
    assert (result["status"], result["end_reason"], len(result["turns"])) == ("passed", "max_turns", 10)

def test_the_repeats_pages_runs_to_a_decision_are_the_stopping_rules() -> None:
    # the page said a clearly good agent costs "a handful of runs": a flawless one at threshold 0.8 made 26
    from tamesu.results.stats import sequential_decision

    text = " ".join(DOCS.joinpath("repeats.md").read_text(encoding="utf-8").split())
    said = re.search(r"every run failing stops it after (\d+) runs at `pass_threshold: ([\d.]+)`; every run "
                     r"passing, after (\d+) at ([\d.]+), (\d+) at ([\d.]+), (\d+) at ([\d.]+)\)", text)
    assert said, "the adaptive section says how many runs decide a broken and a flawless agent"
    numbers = said.groups()

    def decided_after(passing: bool, threshold: float) -> int:
        return next(n for n in range(1, 1000)
                    if sequential_decision(n if passing else 0, n, threshold, 0.95, 5) is not None)

    assert decided_after(False, float(numbers[1])) == int(numbers[0])
    for runs, threshold in zip(numbers[2::2], numbers[3::2], strict=True):
        assert decided_after(True, float(threshold)) == int(runs), (runs, threshold)


def test_the_cli_pages_init_over_an_existing_project_writes_nothing_as_it_says(tmp_path: Path) -> None:
    # the page said what `init` writes, not what it does where a project already is: exit 2, nothing written
    text = DOCS.joinpath("cli.md").read_text(encoding="utf-8")
    said = re.search(r"when one of its three files is already there it writes nothing and exits (\d) \(`([^`]+)`\)",
                     text)
    assert said, "the init row says what init does over an existing project"
    (tmp_path / "tamesu.yaml").write_text("out: mine\n", encoding="utf-8")
    done = run_tamesu(["init"], tmp_path)
    assert done.returncode == int(said.group(1)), done.stdout + done.stderr
    assert done.stderr.strip() == said.group(2), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tamesu.yaml"]
    assert (tmp_path / "tamesu.yaml").read_text(encoding="utf-8") == "out: mine\n"


def test_the_concepts_pages_recorded_metric_suffixes_are_what_result_json_records() -> None:
    # the page said `_p50`, `_p95` and `_max` are computed on request: result.json records them for every run
    from tamesu.engine.metrics import Metrics

    text = " ".join(DOCS.joinpath("concepts.md").read_text(encoding="utf-8").split())
    said = re.search(r"`result\.json` records its ((?:`_\w+`(?:, | and )?)+), and an assertion or SLO may ask for any "
                     r"`_pNN`, ((?:`_\w+`(?:, | or )?)+) too", text)
    assert said, "the metrics section says which suffixes result.json records"
    recorded = re.findall(r"`_(\w+)`", said.group(1))
    metrics = Metrics({"turns": 3.0}, {"turn_latency_ms": [10.0, 30.0, 20.0]})
    assert set(metrics.standard()) == {"turns", "turn_latency_ms", *(f"turn_latency_ms_{s}" for s in recorded)}
    for asked in ("p99", *re.findall(r"`_(\w+)`", said.group(2))):
        assert f"turn_latency_ms_{asked}" in metrics and f"turn_latency_ms_{asked}" not in metrics.standard()


def test_getting_starteds_init_line_names_every_file_init_writes(tmp_path: Path) -> None:
    # it named four of them: the two JSON Schemas `init` writes under .tamesu/schema/ were left out
    page = DOCS.joinpath("getting-started.md").read_text(encoding="utf-8")
    said = re.search(r"tamesu init +# writes (.*?)\ntamesu validate", page, re.S)
    assert said, "the first suite's commands say what init writes"
    named = " ".join(line.lstrip("# ") for line in said.group(1).split("\n"))
    done = run_tamesu(["init"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for path in sorted(p for p in tmp_path.rglob("*") if p.is_file()):
        written = path.relative_to(tmp_path).as_posix()
        assert written in named or f"{path.parent.relative_to(tmp_path).as_posix()}/" in named, (written, named)


def test_the_concepts_pages_suites_section_names_every_key_of_a_suite_a_project_and_a_test() -> None:
    # it named seven of a suite's thirteen keys, ten of tamesu.yaml's seventeen (not `targets`, `store`,
    # `report`...) and left out a test's `pass_k`, `adaptive`, `counterpart`, `steps`, `fuzz_tools`
    from tamesu.suite.schema import ProjectSpec, Scenario, ScriptStep, SuiteSpec, TestSpec

    text = DOCS.joinpath("concepts.md").read_text(encoding="utf-8")
    section = text.split("## Suites", 1)[1].split("\n- **Cases**", 1)[0]
    named = set(re.findall(r"`([a-z_]+)(?:[.:][^`]*)?`", section))
    for model in (SuiteSpec, ProjectSpec, TestSpec, Scenario, ScriptStep):
        keys = {field.alias or name for name, field in model.model_fields.items()}
        assert keys <= named, (model.__name__, sorted(keys - named))
