"""What code a run tested: CI's variables first, then one `git rev-parse` in the project's folder for the commit
and the branch (a detached HEAD has no branch; a folder outside git, or a repository without commits, neither)."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
