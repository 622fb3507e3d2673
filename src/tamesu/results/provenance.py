"""Which run this is and what code it tested: the run id shards share, the git commit and branch."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

_GIT_TIMEOUT_S = 2


@dataclass(frozen=True)
class Provenance:
    run_id: str | None
    """TAMESU_RUN_ID: shards of one CI run set the same value, so the store shows them as one run."""
    commit: str | None
    branch: str | None


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value else None


def provenance(project_dir: Path, environ: dict[str, str] | None = None) -> Provenance:
    """CI's own variables first (a CI checkout is often a detached HEAD), then git in the project's folder."""
    env = os.environ if environ is None else environ
    commit = env.get("TAMESU_COMMIT") or env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA")
    branch = env.get("TAMESU_BRANCH") or env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") \
        or env.get("CI_COMMIT_REF_NAME")
    if not commit or not branch:
        # one git for both (a process each cost a run ~2 ms): the commit's line, then the branch's
        lines = (_git(project_dir, "rev-parse", "HEAD", "--abbrev-ref", "HEAD") or "").splitlines()
        if len(lines) == 2:
            commit, branch = commit or lines[0].strip() or None, branch or lines[1].strip() or None
    if branch == "HEAD":
        branch = None
    return Provenance(run_id=env.get("TAMESU_RUN_ID") or None, commit=commit, branch=branch)
