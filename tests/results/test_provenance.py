"""What code a run tested: CI's variables first, then one `git rev-parse` in the project's folder for the commit
and the branch (a detached HEAD has no branch; a folder outside git, or a repository without commits, neither)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tamesu.results.provenance import provenance


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "init.defaultBranch=trunk", *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_commit_and_branch_from_git_and_from_ci(tmp_path: Path) -> None:
    outside = provenance(tmp_path, {})
    assert (outside.run_id, outside.commit, outside.branch) == (None, None, None)
    _git(tmp_path, "init", "-q")
    assert (provenance(tmp_path, {}).commit, provenance(tmp_path, {}).branch) == (None, None)  # no commit yet
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "first")
    head = _git(tmp_path, "rev-parse", "HEAD")
    found = provenance(tmp_path, {"TAMESU_RUN_ID": "ci-7"})
    assert (found.run_id, found.commit, found.branch) == ("ci-7", head, "trunk")
    ci = provenance(tmp_path, {"GITHUB_SHA": "c0ffee", "GITHUB_REF_NAME": "release"})
    assert (ci.commit, ci.branch) == ("c0ffee", "release")
    assert provenance(tmp_path, {"GITHUB_SHA": "c0ffee"}).branch == "trunk"  # the branch still from git
    assert provenance(tmp_path, {"TAMESU_BRANCH": "x"}).commit == head
    _git(tmp_path, "checkout", "-q", "--detach")
    detached = provenance(tmp_path, {})
    assert (detached.commit, detached.branch) == (head, None)


def test_a_checkout_with_changes_is_its_commit_and_a_fingerprint_of_them(tmp_path: Path) -> None:
    # before: the commit alone, so a test that failed, was fixed in the working tree and passed was "flaky on" it
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "suite.yaml").write_text("a: 1\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    head = _git(tmp_path, "rev-parse", "HEAD")
    project = tmp_path / "project"  # a project below the checkout's top: changes anywhere in it count
    project.mkdir()
    out, own = project / "tamesu-runs", project / ".tamesu"
    for folder in (out, own, tmp_path / "ignored"):  # tamesu's own output and what git ignores: no change
        folder.mkdir()
        (folder / "x.json").write_text("{}")

    def commit() -> str | None:
        return provenance(project, {}, own=(out, own)).commit

    assert commit() == head
    (tmp_path / "suite.yaml").write_text("a: 2\n")
    first = commit()
    assert first is not None and first.startswith(f"{head}+") and len(first) == len(head) + 13
    (tmp_path / "suite.yaml").write_text("a: 3\n")
    assert commit() not in (head, first)  # other changes: other code
    (tmp_path / "suite.yaml").write_text("a: 2\n")
    assert commit() == first  # the same changes: the same code
    (tmp_path / "suite.yaml").write_text("a: 1\n")
    assert commit() == head
    (project / "agent.py").write_text("print('new')\n")  # a file git does not track yet
    assert commit() not in (head, first)
    assert provenance(project, {"GITHUB_SHA": "c0ffee"}, own=(out, own)).commit == "c0ffee"  # CI names its code


_SUITE = """\
models: { bot: { provider: fake, rules: [ { say: "hello" } ] } }
hooks: { before_each: [ "echo called >> agent.log && echo 4242 > agent.pid" ] }
targets: { bot: { type: model, model: bot } }
tests: [ { name: a, target: bot, scenario: { script: [ { say: hi } ] } } ]
"""


def test_files_the_agent_writes_in_the_checkout_while_a_run_goes_are_no_change_of_the_code(
        tmp_path: Path, tamesu: Any) -> None:
    # before: the agent's log and pid file (here a hook's, as an agent started beside the run writes them) were
    # changes of the code, so each run on one commit was `COMMIT+<new fingerprint>` and no test was ever flaky
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("tamesu-runs/\n.tamesu/\n")
    (tmp_path / "suite.yaml").write_text(_SUITE)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    head = _git(tmp_path, "rev-parse", "HEAD")

    def run() -> str:
        done = tamesu(["run", "suite.yaml"], cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        newest = max((tmp_path / "tamesu-runs").iterdir(), key=lambda folder: folder.name)
        return str(json.loads((newest / "plan.json").read_text())["commit"])

    assert run() == head
    assert (tmp_path / "agent.log").is_file() and (tmp_path / "agent.pid").is_file()
    assert run() == head  # the log and pid file were written during the run before: the agent's
    assert run() == head
    helper = tmp_path / "helper.py"  # a file of code, not yet added, written after the runs: it counts
    helper.write_text("x = 1\n")
    later = max(entry.stat().st_mtime_ns for entry in (tmp_path / "tamesu-runs").rglob("*")) + 10_000_000_000
    os.utime(helper, ns=(later, later))
    changed = run()
    assert changed.startswith(f"{head}+"), changed
    assert run() == changed  # the agent's files again aside, the same code
