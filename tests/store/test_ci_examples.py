"""The CI examples in examples/ci agree with themselves and with tamesu (the shard counts match, the commands
are tamesu's own, the flags exist), and their commands run here as their engines would run them: the GitHub
workflow's matrix and merge jobs step by step (actions done by their documented effect on the workspace), the
Kubernetes Job's pods in test_store.py (they need the PostgreSQL server started there)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked

CI = Path(__file__).resolve().parents[2] / "examples" / "ci"


def _load(name: str) -> dict:
    return YAML(typ="safe").load((CI / name).read_text())


def _echo_app() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


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


# -- the examples' own commands, run here as their CI engines would run them ---------------------------------

EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")
SUITE_TESTS = [f"t{i}" for i in range(7)] + ["broken"]


def _expand(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in values, f"the example uses ${{{{ {name} }}}}, which this test does not give a value"
        return values[name]

    return EXPRESSION.sub(value, text)


def _tamesu_on_path(folder: Path) -> dict[str, str]:
    """A `tamesu` command on PATH that is this checkout's, as `pip install tamesu` gives a runner."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "tamesu"
    # `python -m tamesu` forked from the warm zygote (tests/forked.py): each shard's run spent 1.5 s importing
    shim.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in forked.tamesu_command()) + ' "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}


def _agent_project(root: Path, agent_url: str) -> Path:
    root.mkdir(parents=True)
    (root / "tamesu.yaml").write_text("suites: ['suite.yaml']\n")
    tests = "".join(f"""\
  - name: {name}
    target: bot
    scenario: {{ script: [ {{ say: {name} }} ] }}
    assert: [ {{ contains: "echo: t" }} ]
""" for name in SUITE_TESTS)  # `broken` is answered "echo: broken": it fails
    (root / "suite.yaml").write_text(f"targets:\n  bot: {{ type: rest, url: '{agent_url}/chat' }}\ntests:\n{tests}")
    return root


@dataclass
class Job:
    failed: bool = False
    exits: list[int] = field(default_factory=list)
    output: str = ""


def _play(job: dict, values: dict[str, str], *, project: Path, workspace: Path, artifacts: Path,
          env: dict[str, str]) -> Job:
    """A GitHub Actions job's steps, in order, as a runner takes them: a step after a failed one runs only
    with `if: always()`; the actions it uses are done here by their documented effect on the workspace."""
    played = Job()
    job_env = {**env, **{name: _expand(str(value), values) for name, value in job.get("env", {}).items()}}
    for step in job["steps"]:
        if played.failed and step.get("if") != "always()":
            continue
        uses, given = step.get("uses", ""), step.get("with", {})
        if uses.startswith("actions/checkout@"):
            shutil.copytree(project, workspace, dirs_exist_ok=True)
        elif uses.startswith("actions/setup-python@"):
            pass  # this Python
        elif uses.startswith("actions/upload-artifact@"):
            # a directory's contents become the artifact's root
            shutil.copytree(workspace / given["path"], artifacts / _expand(given["name"], values))
        elif uses.startswith("actions/download-artifact@"):
            # several artifacts matched by a pattern land in a folder each, named after the artifact
            for artifact in sorted(artifacts.iterdir()):
                if fnmatch.fnmatch(artifact.name, given["pattern"]):
                    shutil.copytree(artifact, workspace / given["path"] / artifact.name)
        elif "run" in step:
            command = _expand(step["run"], values)
            if command.startswith("pip install"):
                assert "tamesu" in command  # the shim on PATH stands for it
                continue
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command],
                                  cwd=workspace, env=job_env, capture_output=True, text=True, timeout=120)
            played.exits.append(done.returncode)
            played.output += done.stdout + done.stderr
            played.failed = played.failed or done.returncode != 0
        else:
            raise AssertionError(f"a step this test cannot play: {step}")
    return played


def test_the_github_workflow_runs_here_shards_upload_and_the_merge_job_joins_them(tmp_path: Path, serve) -> None:
    pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")
    from tamesu.store import store_url
    from tamesu.store.db import Store
    from tamesu.store.queries import Reader

    workflow = _load("github-actions.yml")
    project = _agent_project(tmp_path / "repo", serve(_echo_app()).url)
    # a SQLite file stands in for the team's PostgreSQL; four writers at once get room for its lock on a
    # loaded machine
    env = {**_tamesu_on_path(tmp_path / "bin"), "TAMESU_STORE_TIMEOUT": "60"}
    store = tmp_path / "team-store.db"
    summary = tmp_path / "step-summary.md"
    values = {"secrets.TAMESU_STORE": str(store), "github.run_id": "4242", "github.run_attempt": "1"}
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    shards = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    with ThreadPoolExecutor(len(shards)) as pool:  # the matrix's jobs run side by side, each on its runner
        jobs = list(pool.map(lambda shard: _play(
            workflow["jobs"]["shard"], {**values, "matrix.shard": str(shard)}, project=project,
            workspace=tmp_path / f"runner-{shard}", artifacts=artifacts, env=env), shards))
    for played in jobs:  # a failing test does not fail its shard's job: the merge job decides
        assert not played.failed and played.exits == [0], played.output
    assert sorted(a.name for a in artifacts.iterdir()) == [f"tamesu-shard-{s}" for s in shards]

    merge = _play(workflow["jobs"]["merge"], values, project=project, workspace=tmp_path / "runner-merge",
                  artifacts=artifacts, env={**env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    assert merge.failed and merge.exits == [1], merge.output  # the merged run has the failing test
    [merged] = [p for p in (artifacts / "tamesu-merged").iterdir() if p.is_dir()]  # uploaded, if: always()
    results = [json.loads(line) for line in (merged / "results.jsonl").read_text().splitlines()]
    assert sorted(r["test"] for r in results) == sorted(SUITE_TESTS)
    assert json.loads((merged / "run.json").read_text())["exit_code"] == 1
    assert (merged / "junit.xml").is_file() and (merged / "report.html").is_file()
    assert "broken" in summary.read_text()
    reader = Reader(Store(store_url(str(store), tmp_path, environ={})))
    [run] = reader.runs()  # the four shards wrote one run into the shared store
    assert run.id == "gh-4242-1" and run.shards == [f"{s}/{len(shards)}" for s in shards]
    assert run.counts["passed"] == len(SUITE_TESTS) - 1 and run.counts["failed"] == 1
