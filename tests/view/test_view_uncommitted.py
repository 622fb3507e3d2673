"""A test fixed in the working tree is no flaky test: runs on one commit with other uncommitted changes between
them tested other code (before, a test that failed, was fixed without a commit and passed was "flaky on" the
commit on `tamesu view`'s Tests page, the store being on by default)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx

from view.conftest import View, stored_run

SUITE = """
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ say: hello }} ] }}
tests:
  - {{ name: greets, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: {expect} }} ] }}
  - {{ name: steady, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: hello }} ] }}
"""
NO_CI = {"TAMESU_COMMIT": "", "GITHUB_SHA": "", "CI_COMMIT_SHA": ""}  # the commit from git, as on a laptop


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_test_fixed_in_the_working_tree_is_not_flaky(tmp_path: Path, view: Callable[..., View]) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(SUITE.format(expect="hullo"))  # a typo: it fails
    (tmp_path / ".gitignore").write_text("out/\n.tamesu/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "a suite")
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert stored_run(tmp_path, env=NO_CI).returncode == 1
    (tmp_path / "s.tamesu.yaml").write_text(SUITE.format(expect="hello"))  # fixed, not committed yet
    assert stored_run(tmp_path, env=NO_CI).returncode == 0
    (tmp_path / "s.tamesu.yaml").write_text(SUITE.format(expect="hullo"))  # as committed again
    assert stored_run(tmp_path, env=NO_CI).returncode == 1
    page = httpx.get(f"{view(tmp_path).url}/tests", timeout=30).text
    assert "0 flaky test(s)" in page, page
    runs = httpx.get(f"{view(tmp_path).url}/", timeout=30).text
    assert runs.count(f"<code>{head[:10]}</code>") == 2, runs  # the two runs of the commit as it is
    assert runs.count(f'<code title="{head}+') == 1, runs  # the run of the changed checkout, said so
