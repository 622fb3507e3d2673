"""Which run this is and what code it tested: the run id shards share, the git commit and branch."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_GIT_TIMEOUT_S = 2


@dataclass(frozen=True)
class Provenance:
    run_id: str | None
    """TAMESU_RUN_ID: shards of one CI run set the same value, so the store shows them as one run."""
    commit: str | None
    branch: str | None


def _git_bytes(folder: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=_GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git(folder: Path, *args: str) -> str | None:
    found = _git_bytes(folder, *args)
    value = found.decode("utf-8", "replace").strip() if found is not None else ""
    return value or None


def _changes(folder: Path, root: Path, own: Iterable[Path]) -> str | None:
    """A short fingerprint of the checkout's changes against HEAD (edits, staged or not, and files git does not
    ignore), or None when there are none: two runs on one commit with other changes between them tested other code,
    and a test that failed, was fixed and passed is no flaky test. tamesu's own output (`own`: the run folders, the
    store, the replay cache) is no change of the code, nor is an untracked file last changed while a run of `own`'s
    run folders was going (`_while_runs`): an agent's log or pid file in the checkout, rewritten by each run, made
    each a new fingerprint, so no test was ever found flaky across runs. Files git does not track count by name,
    size and time of change, so a large one costs nothing to read."""
    own = list(own)
    spec = ["--", ":(top)"]
    for path in own:
        try:
            spec.append(f":(top,exclude){path.resolve().relative_to(root.resolve()).as_posix()}")
        except (ValueError, OSError):
            continue  # outside the checkout: nothing of it is in git's view
    status = _git_bytes(folder, "status", "--porcelain=v1", "-z", "--untracked-files=all", *spec)
    if not status:
        return None  # clean, or git could not say: the commit alone, as before
    edits = _git_bytes(folder, "diff", "HEAD", "--no-ext-diff", "--no-textconv", "--binary", *spec) or b""
    digest, counted = hashlib.sha256(edits), bool(edits)
    runs = _while_runs(own)
    for entry in status.split(b"\0"):
        if entry.startswith(b"?? "):
            try:
                seen = (root / os.fsdecode(entry[3:])).stat()
            except OSError:
                continue
            if any(start <= seen.st_mtime_ns <= end for start, end in runs):
                continue  # written while a run went: the agent's, not the code
            digest.update(b"\0%s\0%d\0%d" % (entry[3:], seen.st_size, seen.st_mtime_ns))
            counted = True
    return digest.hexdigest()[:12] if counted else None


_RUNS_READ = 50
"""The newest run folders whose times are read: a file the agent wrote is rewritten by every run, so the last ones
are enough, and a folder of thousands of runs costs no more."""
_SLACK_NS = 2_000_000_000
"""Before a run's plan.json and after its last file: an agent a hook started writes before the first and as it
stops after the last."""


def _while_runs(own: Iterable[Path]) -> list[tuple[int, int]]:
    """When the newest runs in the folders of `own` went, each from its plan.json (written as it starts) to the last
    file written at its top (run.json, the reports), in ns since the epoch, widened by `_SLACK_NS`."""
    spans: list[tuple[int, int]] = []
    for path in own:
        try:
            folders = sorted((entry for entry in os.scandir(path) if entry.is_dir()), key=lambda e: e.name)
        except OSError:
            continue
        for run in folders[-_RUNS_READ:]:
            try:
                start = os.stat(os.path.join(run.path, "plan.json")).st_mtime_ns
                end = max(entry.stat().st_mtime_ns for entry in os.scandir(run.path))
            except (OSError, ValueError):
                continue
            spans.append((start - _SLACK_NS, end + _SLACK_NS))
    return spans


def provenance(project_dir: Path, environ: dict[str, str] | None = None, own: Iterable[Path] = ()) -> Provenance:
    """CI's own variables first (a CI checkout is often a detached HEAD), then git in the project's folder: its
    HEAD, and `HEAD+<fingerprint>` when the checkout holds changes (`own`: tamesu's output folders, not counted)."""
    env = os.environ if environ is None else environ
    commit = env.get("TAMESU_COMMIT") or env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA")
    branch = env.get("TAMESU_BRANCH") or env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") \
        or env.get("CI_COMMIT_REF_NAME")
    if not commit or not branch:
        # one git for all three (a process each cost a run ~2 ms): the checkout's top, the commit, the branch
        lines = (_git(project_dir, "rev-parse", "--show-toplevel", "HEAD", "--abbrev-ref", "HEAD") or "").splitlines()
        if len(lines) == 3:
            head = lines[1].strip() or None
            # the commit CI names is the code it checked out; a checkout's HEAD is its code only while unchanged
            changes = _changes(project_dir, Path(lines[0].strip()), own) if head and not commit else None
            commit = commit or (f"{head}+{changes}" if changes else head)
            branch = branch or lines[2].strip() or None
    if branch == "HEAD":
        branch = None
    return Provenance(run_id=env.get("TAMESU_RUN_ID") or None, commit=commit, branch=branch)
