"""Which files a project's `suites` patterns name: `**` stays out of the run folders, hidden folders,
`node_modules`, `__pycache__` and virtual environments (a project's folder holds them, and walking them took
seconds once a few hundred runs were on disk), and otherwise matches as `Path.glob` does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tamesu.plan.project import load_project, suite_files

PROJECT = ('models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n'
           "targets:\n  bot: { type: model, model: target }\n")


def _suite(name: str) -> str:
    return f"tests:\n  - name: {name}\n    target: bot\n    scenario: {{ script: [{{ say: hi }}] }}\n"


BROKEN = "tests: [ { name: read by mistake } ]\n"  # nothing plays the user: a suite error if it were ever loaded


def _write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _project_with_clutter(root: Path) -> None:
    _write(root / "tamesu.yaml", PROJECT)
    _write(root / "suites" / "first.yaml", _suite("first"))
    _write(root / "deep" / "er" / "second.tamesu.yaml", _suite("second"))
    # what a project's folder holds besides its suites, each with a suite file that must not be read
    _write(root / ".git" / "x.tamesu.yaml", BROKEN)
    _write(root / ".venv" / "lib" / "x.tamesu.yaml", BROKEN)
    _write(root / "venv" / "pyvenv.cfg", "home = /usr/bin\n")  # a virtual environment by any name
    _write(root / "venv" / "lib" / "x.tamesu.yaml", BROKEN)
    _write(root / "node_modules" / "pkg" / "x.tamesu.yaml", BROKEN)
    _write(root / "deep" / "__pycache__" / "x.tamesu.yaml", BROKEN)
    _write(root / "tamesu-runs" / "20261205-101010-001-ab12" / "x.tamesu.yaml", BROKEN)  # the project's `out`
    other_out = root / "elsewhere" / "20261205-101010-002-cd34"  # a run folder `--out` put anywhere
    for name in ("run.json", "results.jsonl"):
        _write(other_out / name, "{}\n")
    _write(other_out / "shop" / "x.tamesu.yaml", BROKEN)


def test_a_project_cluttered_with_runs_venvs_and_node_modules_reads_only_its_suites(tmp_path: Path,
                                                                                    tamesu: Any) -> None:
    _project_with_clutter(tmp_path)
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.strip() == "ok: 2 tests in 2 suites"
    listed = tamesu(["list", "--json"], cwd=tmp_path)
    assert sorted(json.loads(line)["name"] for line in listed.stdout.splitlines()) == ["first", "second"]
    # the same folders read as suites when a pattern names them in its own words
    (tmp_path / "tamesu.yaml").write_text("suites: ['**/*.tamesu.yaml', 'node_modules/*/*.yaml']\n" + PROJECT)
    named = tamesu(["validate"], cwd=tmp_path)
    assert named.returncode == 2, named.stdout + named.stderr
    assert named.stderr.splitlines() == ["node_modules/pkg/x.tamesu.yaml:1:10: tests[0]: nothing plays the user: "
                                         "add scenario.script steps, or set models.simulator so the persona can "
                                         "speak", "1 problem found"]


@pytest.mark.parametrize("pattern", ["**/*.yaml", "cases/**/*.yaml", "**/b/**/*.yaml", "cases/**", "*/*.yaml",
                                     "**/x*.yaml", "ca*/**/x/*.yaml"])
def test_a_pattern_matches_what_path_glob_matches_where_nothing_is_left_out(tmp_path: Path, pattern: str) -> None:
    for relative in ("top.yaml", "cases/one.yaml", "cases/a/two.yaml", "cases/a/b/x3.yaml", "cases/b/x/x4.yaml",
                     "b/five.yaml", "b/c/b/six.yaml", "cases/a/notes.txt"):
        _write(tmp_path / relative, "tests: []\n")
    (tmp_path / "tamesu.yaml").write_text(f"suites: ['{pattern}']\n")
    project = load_project(tmp_path / "tamesu.yaml", tmp_path)
    found = suite_files([], project)
    expected = {p for p in project.dir.glob(pattern) if p.name != "tamesu.yaml"}
    assert expected, pattern  # each pattern matches something, so an empty answer cannot pass
    assert len(found) == len(set(found)) and set(found) == expected


def test_two_suites_of_one_name_in_two_folders_are_one_problem(tmp_path: Path, tamesu: Any) -> None:
    # a test's id is suite/test: billing/smoke and support/smoke would share ids, filters, history and baselines
    _write(tmp_path / "tamesu.yaml", PROJECT)
    _write(tmp_path / "billing" / "smoke.tamesu.yaml", _suite("order"))
    _write(tmp_path / "support" / "smoke.tamesu.yaml", _suite("order"))
    checked = tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert checked.stderr.splitlines() == [
        "support/smoke.tamesu.yaml:1:1: another suite is named 'smoke' (billing/smoke.tamesu.yaml): test ids "
        "(suite/test) would be the same; give one a `name:`", "1 problem found"]
    assert tamesu(["run"], cwd=tmp_path).returncode == 2  # nothing runs
    _write(tmp_path / "support" / "smoke.tamesu.yaml", "name: support-smoke\n" + _suite("order"))
    listed = tamesu(["list", "--json"], cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert sorted(json.loads(line)["id"] for line in listed.stdout.splitlines()) == ["smoke/order",
                                                                                    "support-smoke/order"]


def test_a_project_file_above_the_repository_is_not_the_projects(tmp_path: Path, tamesu: Any) -> None:
    # a tamesu.yaml left in the home folder (or in /tmp) was read as the project of every repository below it:
    # its suites, models, targets and `out`
    _write(tmp_path / "tamesu.yaml", "suites: ['nowhere/*.yaml']\nout: far-away-runs\n")
    repo = tmp_path / "repo"
    _write(repo / "suites" / "smoke.tamesu.yaml", PROJECT + _suite("answers"))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, timeout=30)
    result = tamesu(["run", "suites/smoke.tamesu.yaml"], cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (repo / "tamesu-runs").is_dir() and not (tmp_path / "far-away-runs").exists()
    # inside the repository, the nearest one is the project's, wherever the suite is
    _write(repo / "tamesu.yaml", "suites: ['suites/*.yaml']\nout: repo-runs\n")
    listed = tamesu(["list", "--json"], cwd=repo / "suites")
    assert listed.returncode == 0 and json.loads(listed.stdout)["id"] == "smoke/answers", listed.stdout + listed.stderr


def test_a_nested_project_is_left_to_its_own_project_file(tmp_path: Path, tamesu: Any) -> None:
    # before: `tamesu validate` from above read sub/x.tamesu.yaml with the outer project ("no target named
    # 'bot'"), while naming the file, or running from sub/, said ok: two verdicts for one suite
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "tamesu.yaml").write_text('targets:\n  bot: { type: rest, url: "http://127.0.0.1:9/c" }\n')
    (tmp_path / "sub" / "x.tamesu.yaml").write_text(
        "tests:\n  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }\n")
    (tmp_path / "top.tamesu.yaml").write_text(
        'targets:\n  b: { type: rest, url: "http://127.0.0.1:9/x" }\n'
        "tests:\n  - { name: top, target: b, scenario: { script: [ { say: hi } ] } }\n")
    assert [p.name for p in suite_files([], load_project(None, tmp_path))] == ["top.tamesu.yaml"]
    from_above = tamesu(["validate"], cwd=tmp_path)
    assert from_above.returncode == 0 and from_above.stdout.strip() == "ok: 1 test in 1 suite", from_above.stderr
    inside = tamesu(["validate"], cwd=tmp_path / "sub")
    assert inside.returncode == 0 and inside.stdout.strip() == "ok: 1 test in 1 suite", inside.stderr
