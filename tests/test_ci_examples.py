"""The CI examples in examples/ci agree with themselves and with tamesu: the shard counts match, the
commands are tamesu's own, and the commands' flags exist."""

from __future__ import annotations

import re
from pathlib import Path

from ruamel.yaml import YAML

CI = Path(__file__).resolve().parent.parent / "examples" / "ci"


def _load(name: str) -> dict:
    return YAML(typ="safe").load((CI / name).read_text())


def test_the_github_matrix_runs_every_shard_and_merges_them(tamesu, tmp_path: Path) -> None:
    workflow = _load("github-actions.yml")
    shard_job, merge_job = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    shards = shard_job["strategy"]["matrix"]["shard"]
    runs = [step["run"] for step in shard_job["steps"] if "run" in step]
    [command] = [r for r in runs if r.startswith("tamesu run")]
    total = int(re.search(r"--shard \$\{\{ matrix.shard \}\}/(\d+)", command).group(1))
    assert shards == list(range(1, total + 1))
    assert merge_job["needs"] == "shard" and merge_job["if"] == "always()"
    assert any(step.get("run", "").startswith("tamesu merge shards/") for step in merge_job["steps"])
    uploads = [s for s in shard_job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["with"]["path"] == "shard-runs/" and "--out shard-runs" in command
    for flag in ("--shard", "--out", "--report"):
        assert flag in tamesu(["run", "--help"], cwd=tmp_path).stdout
    assert "--report" in tamesu(["merge", "--help"], cwd=tmp_path).stdout


def test_the_indexed_job_tells_each_pod_the_shard_count(tamesu, tmp_path: Path) -> None:
    job = _load("k8s-indexed-job.yaml")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    [container] = spec["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert int(env["TAMESU_SHARD_COUNT"]["value"]) == spec["completions"]
    assert container["command"][:4] == ["tamesu", "run", "--shard", "auto"]
    assert "job-name" in env["TAMESU_RUN_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert env["TAMESU_STORE"]["valueFrom"]["secretKeyRef"]["key"] == "url"
    assert "auto" in tamesu(["run", "--help"], cwd=tmp_path).stdout
