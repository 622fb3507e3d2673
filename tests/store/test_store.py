"""The results store against a real PostgreSQL (started here) and SQLite: what `tamesu run` writes as tests
finish, migrations from an empty database, shards writing at once, a killed run, a store that is down, and
`tamesu store import` giving back what the live run wrote."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pg_server import CannotStart, PostgresServer
from ports import refused_port
from tamesu.store import store_url
from tamesu.store.db import HEAD_REVISION, Store
from tamesu.store.queries import Reader

pytestmark = pytest.mark.db


class Agent:
    """`flaky` answers good, then bad, then good...; `slow N` waits N seconds; else an echo."""

    def __init__(self) -> None:
        self.flaky = 0

    async def chat(self, request: Request) -> JSONResponse:
        import asyncio

        message = str((await request.json()).get("message", ""))
        if message == "flaky":
            self.flaky += 1
            return JSONResponse({"text": "good" if self.flaky % 2 else "bad"})
        if message.startswith("slow"):
            await asyncio.sleep(float(message.split()[1]))
            return JSONResponse({"text": "finally"})
        return JSONResponse({"text": f"echo: {message}"})


@pytest.fixture
def agent_url(serve) -> str:
    agent = Agent()
    return serve(Starlette(routes=[Route("/chat", agent.chat, methods=["POST"])])).url


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer().start()
    except (CannotStart, OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"PostgreSQL cannot start here: {exc}")
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path: Path) -> str:
    """An empty store of each kind (a fresh database on the shared server)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    server = request.getfixturevalue("postgres")
    return server.create_database("t" + uuid.uuid4().hex[:12])


def project(tmp_path: Path, agent_url: str, tests: str) -> Path:
    (tmp_path / "tamesu.yaml").write_text("suites: ['suite.yaml']\ndefaults:\n  slo: { turn_latency_ms_p95: 60000 }\n")
    (tmp_path / "suite.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{agent_url}/chat' }}\ntests:\n{tests}", encoding="utf-8")
    return tmp_path


TWO_TESTS = """\
  - name: flaky
    target: bot
    scenario: { script: [ { say: flaky } ] }
    assert: [ { contains: good } ]
  - name: echo
    target: bot
    scenario: { script: [ { say: hello }, { say: again } ] }
    assert: [ { contains: "echo: again" }, { turns: { equals: 2 } } ]
"""


def test_migrations_create_exactly_the_tables_from_an_empty_database(url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from tamesu.store._tables import metadata

    store = Store(store_url(url, Path.cwd(), environ={}))
    assert store.revision() is None
    store.migrate()
    store.migrate()  # a second time changes nothing
    assert store.revision() == "0004" == HEAD_REVISION
    with store.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    assert differences == []
    store.close()


def test_a_run_is_written_as_it_runs_and_import_gives_back_the_same(tmp_path: Path, tamesu, agent_url: str,
                                                                     url: str) -> None:
    root = project(tmp_path, agent_url, TWO_TESTS)
    env = {"TAMESU_STORE": url, "TAMESU_COMMIT": "c0ffee1", "TAMESU_BRANCH": "main"}
    first = tamesu(["run", "--out", "out"], cwd=root, env=env)
    second = tamesu(["run", "--out", "out"], cwd=root, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert second.returncode == 1, second.stdout + second.stderr
    assert "warning" not in first.stdout + first.stderr
    store = Store(store_url(url, root, environ={}))
    reader = Reader(store)
    runs = reader.runs()
    assert len(runs) == 2
    newest, oldest = runs
    assert oldest.counts["passed"] == 2 and newest.counts["failed"] == 1
    assert newest.commit == "c0ffee1" and newest.branch == "main" and newest.finished
    history = reader.history("suite/flaky")
    assert [h.status for h in history] == ["failed", "passed"]
    failed_run = history[0].runs[0]
    assert failed_run.transcript == [{"role": "user", "text": "flaky", "turn": 1},
                                     {"role": "agent", "text": "bad", "turn": 1}]
    verdicts = {a["name"]: a for a in failed_run.assertions}
    assert verdicts["contains"]["passed"] is False and "good" in verdicts["contains"]["reason"]
    assert verdicts["slo/turn_latency_ms_p95"]["passed"] is True
    assert history[0].slo == {"turn_latency_ms_p95": 60000}
    assert "turn_latency_ms_p95" in failed_run.metrics
    flaky = {t.test_id: t for t in reader.tests()}
    assert flaky["suite/flaky"].flaky_commits == ["c0ffee1"] and not flaky["suite/echo"].flaky_commits

    # the same folders imported into a fresh SQLite store read back the same
    copy_url = f"sqlite:///{tmp_path / 'copy.db'}"
    imported = tamesu(["store", "import", "out", "--store", copy_url], cwd=root)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.count("imported") == 2
    again = tamesu(["store", "import", "out", "--store", copy_url], cwd=root)
    assert again.returncode == 0
    copy = Reader(Store(copy_url))
    assert [r.id for r in copy.runs()] == [r.id for r in runs]
    for run in runs:
        live, back = reader.as_loaded_run(run.id), copy.as_loaded_run(run.id)
        assert live is not None and back is not None
        assert [r.model_dump() for r in back.results] == [r.model_dump() for r in live.results]
    assert [[(r.transcript, r.assertions, r.metrics) for r in h.runs] for h in copy.history("suite/flaky")] == \
        [[(r.transcript, r.assertions, r.metrics) for r in h.runs] for h in history]
    assert copy.tests()[0].flaky_commits == ["c0ffee1"]
    store.close()


def test_two_shards_write_into_one_run_at_once(tmp_path: Path, agent_url: str, url: str) -> None:
    tests = "".join(f"""\
  - name: t{i}
    target: bot
    scenario: {{ script: [ {{ say: "slow 0.05" }} ] }}
    assert: [ {{ contains: finally }} ]
""" for i in range(12))
    root = project(tmp_path, agent_url, tests)
    processes = []
    for index in range(2):
        env = {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": url, "TAMESU_RUN_ID": "ci-run-7",
               "JOB_COMPLETION_INDEX": str(index), "TAMESU_SHARD_COUNT": "2"}
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "tamesu", "run", "--out", f"out{index}", "--shard", "auto"], cwd=root,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [p.communicate(timeout=120)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    assert not any("warning" in o for o in outputs), outputs
    reader = Reader(Store(store_url(url, root, environ={})))
    runs = reader.runs()
    assert [r.id for r in runs] == ["ci-run-7"]
    assert runs[0].shards == ["1/2", "2/2"] and len(runs[0].dirs) == 2
    assert runs[0].counts["passed"] == 12 and runs[0].finished
    loaded = reader.as_loaded_run("ci-run-7")
    assert loaded is not None
    assert sorted(r.id for r in loaded.results) == sorted(f"suite/t{i}" for i in range(12))


def _killed_once_two_are_stored(args: list[str], cwd: Path, url: str) -> Reader:
    """Start `tamesu ARGS` writing to the store at `url`, kill it (SIGKILL: no clean-up runs) once two tests are
    in the store, and give back a reader of that store."""
    env = {**os.environ, "NO_COLOR": "1", "TAMESU_STORE": url}
    process = subprocess.Popen([sys.executable, "-m", "tamesu", *args], cwd=cwd, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reader = Reader(Store(store_url(url, cwd, environ={})))
    try:
        deadline, written = time.monotonic() + 60, 0
        while time.monotonic() < deadline and written < 2:
            time.sleep(0.05)
            try:
                runs = reader.runs()
            except Exception:  # the tables may not exist yet
                continue
            written = runs[0].counts.get("total", 0) if runs else 0
        assert written >= 2, "no two tests reached the store in time"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    return reader


def test_a_killed_run_has_its_finished_tests_in_the_store(tmp_path: Path, agent_url: str, url: str) -> None:
    tests = "".join(f"""\
  - name: slow{i}
    target: bot
    scenario: {{ script: [ {{ say: "slow 0.6" }} ] }}
    assert: [ {{ contains: finally }} ]
""" for i in range(8))
    root = project(tmp_path, agent_url, tests)
    # the store exists, as after a project's first run: on SQLite this run writes it as later runs do, through
    # sqlite3 alone (store.lite); `tamesu test` below is killed on a store it creates (SQLAlchemy's writer)
    existing = Store(store_url(url, root, environ={}))
    existing.migrate()
    existing.close()
    reader = _killed_once_two_are_stored(["run", "--out", "out"], root, url)
    run = reader.runs()[0]
    assert not run.finished and run.exit_code is None
    assert 2 <= run.counts["passed"] == run.counts["total"] < 8
    loaded = reader.as_loaded_run(run.id)
    assert loaded is not None and all(r.status == "passed" for r in loaded.results)


def test_a_store_that_is_down_is_a_warning_and_import_fills_it_in(tmp_path: Path, tamesu, agent_url: str) -> None:
    closed = refused_port()
    root = project(tmp_path, agent_url, TWO_TESTS)
    down = f"postgresql://tamesu:s3cret-pw@127.0.0.1:{closed}/tamesu"
    result = tamesu(["run", "--out", "out"], cwd=root, env={"TAMESU_STORE": down})
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "warning: store: cannot write to postgresql+psycopg://tamesu:***@127.0.0.1" in output
    assert "tamesu store import RUN_DIR" in output
    assert "s3cret-pw" not in output
    run_dir = next((root / "out").iterdir())
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 2 and (run_dir / "run.json").is_file()

    (root / "tamesu.yaml").write_text((root / "tamesu.yaml").read_text() + "store: true\n")
    imported = tamesu(["store", "import", str(run_dir)], cwd=root)
    assert imported.returncode == 0, imported.stderr
    reader = Reader(Store(store_url(True, root, environ={})))
    assert reader.runs()[0].counts["passed"] == 2


def test_a_locked_sqlite_store_is_a_warning(tmp_path: Path, tamesu, agent_url: str, monkeypatch) -> None:
    """A store another writer keeps locked past TAMESU_STORE_TIMEOUT: the run's warning and `tamesu store
    import`'s error (exit 3) are one line naming the file and how long it waited, not the driver's words."""
    import sqlite3

    root = project(tmp_path, agent_url, TWO_TESTS)
    path = tmp_path / "locked.db"
    Store(f"sqlite:///{path}").migrate()
    holder = sqlite3.connect(path)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        env = {"TAMESU_STORE": str(path), "TAMESU_STORE_TIMEOUT": "0.2"}
        result = tamesu(["run", "--out", "out"], cwd=root, env=env)
        imported = tamesu(["store", "import", str(next((root / "out").iterdir()))], cwd=root, env=env)
    finally:
        holder.rollback()
        holder.close()
    assert result.returncode == 0, result.stdout + result.stderr
    said = [line for line in (result.stdout + result.stderr).splitlines() if "warning: store:" in line]
    assert len(said) == 1, result.stdout + result.stderr
    assert said[0].startswith(f"warning: store: {path} stayed locked by another writer: waited 0."), said
    assert said[0].endswith("s, the most a write waits (TAMESU_STORE_TIMEOUT); the run folder is complete, "
                            "`tamesu store import RUN_DIR` fills the store in later"), said
    assert imported.returncode == 3, imported.stdout + imported.stderr
    assert imported.stderr.startswith(f"store: {path} stayed locked by another writer: waited 0."), imported.stderr
    assert len(imported.stderr.splitlines()) == 1 and "Traceback" not in imported.stderr, imported.stderr


def test_without_sqlalchemy_the_default_store_is_a_warning_and_a_configured_one_names_it(tmp_path: Path, tamesu,
                                                                                       agent_url: str) -> None:
    """SQLAlchemy is a core dependency: missing, the install is broken. A run still makes a new SQLite store and
    writes to a current one without it (`tamesu.store.lite`); a store that needs migrating does need it: the
    default store then only warns (the run runs), a store someone asked for is exit 2. PostgreSQL without its
    driver names the store extra."""
    blocked = tmp_path / "blocked"
    for module in ("sqlalchemy", "psycopg"):
        (blocked / module).mkdir(parents=True)  # a package that cannot be imported
        (blocked / module / "__init__.py").write_text(f"raise ImportError('No module named {module}')\n")
    root = project(tmp_path, agent_url, TWO_TESTS)
    env = {"PYTHONPATH": os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])}
    first = tamesu(["run", "--out", "out"], cwd=root, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "warning" not in first.stdout and (root / ".tamesu" / "store.db").is_file()
    # a store not at the current schema (an empty SQLite file has none): migrating it needs SQLAlchemy
    shutil.rmtree(root / ".tamesu")
    (root / ".tamesu").mkdir()
    (root / ".tamesu" / "store.db").write_bytes(b"")
    plain = tamesu(["run", "--out", "out"], cwd=root, env=env)
    assert plain.returncode == 1, plain.stdout + plain.stderr  # it ran: the flaky agent's second answer is bad
    assert "warning: history is off for this run: the results store needs SQLAlchemy" in plain.stdout
    assert (root / ".tamesu" / "store.db").stat().st_size == 0  # left as it was
    configured = tamesu(["run", "--out", "out"], cwd=root, env={**env, "TAMESU_STORE": "true"})
    assert configured.returncode == 2
    assert configured.stderr.strip().splitlines() == [
        "the results store needs SQLAlchemy, part of tamesu's own install: pip install --force-reinstall tamesu"]
    only_psycopg = tmp_path / "only_psycopg"
    shutil.copytree(blocked / "psycopg", only_psycopg / "psycopg")
    env["PYTHONPATH"] = os.pathsep.join([str(only_psycopg), os.environ.get("PYTHONPATH", "")])
    postgres = tamesu(["run", "--out", "out"], cwd=root, env={**env, "TAMESU_STORE": "postgresql://u@127.0.0.1:1/x"})
    assert postgres.returncode == 2
    assert postgres.stderr.startswith("the results store on PostgreSQL needs the store extra: "
                                      "pip install 'tamesu[store]'"), postgres.stderr


def test_shard_auto_reads_the_indexed_job_environment(tmp_path: Path, tamesu, agent_url: str) -> None:
    root = project(tmp_path, agent_url, "".join(f"""\
  - name: t{i}
    target: bot
    scenario: {{ script: [ {{ say: hi }} ] }}
""" for i in range(6)))
    listed = [tamesu(["list", "--shard", "auto"], cwd=root,
                     env={"JOB_COMPLETION_INDEX": str(i), "TAMESU_SHARD_COUNT": "3"}).stdout.splitlines()
              for i in range(3)]
    explicit = [tamesu(["list", "--shard", f"{i + 1}/3"], cwd=root).stdout.splitlines() for i in range(3)]
    assert listed == explicit
    assert sorted(line for shard in listed for line in shard) == sorted(
        tamesu(["list"], cwd=root).stdout.splitlines())
    missing = tamesu(["run", "--shard", "auto"], cwd=root, env={"JOB_COMPLETION_INDEX": "0"})
    assert missing.returncode == 2
    assert "TAMESU_SHARD_COUNT not set" in missing.stderr
    beyond = tamesu(["run", "--shard", "auto"], cwd=root,
                    env={"JOB_COMPLETION_INDEX": "3", "TAMESU_SHARD_COUNT": "3"})
    assert beyond.returncode == 2 and "is not below" in beyond.stderr


def test_the_indexed_job_manifests_pods_write_one_postgresql_run_that_view_shows(tmp_path: Path, agent_url: str,
                                                                                  postgres: PostgresServer) -> None:
    """examples/ci/k8s-indexed-job.yaml played here: one process per completion index, all at once (its
    parallelism), each with the container's command, working directory and environment as Kubernetes fills
    them in (the Job's name label, the store secret, JOB_COMPLETION_INDEX)."""
    from ruamel.yaml import YAML
    from starlette.testclient import TestClient

    from tamesu.view.app import create_app

    job = YAML(typ="safe").load((Path(__file__).resolve().parents[2] / "examples" / "ci" /
                                 "k8s-indexed-job.yaml").read_text())
    spec = job["spec"]
    [container] = spec["template"]["spec"]["containers"]
    assert spec["parallelism"] == spec["completions"]
    url = postgres.create_database("t" + uuid.uuid4().hex[:12])

    def value(entry: dict) -> str:
        if "value" in entry:
            return str(entry["value"])
        source = entry["valueFrom"]
        if "fieldRef" in source:  # Kubernetes labels each pod of a Job with the Job's name
            assert source["fieldRef"]["fieldPath"] == "metadata.labels['batch.kubernetes.io/job-name']"
            return str(job["metadata"]["name"])
        assert source["secretKeyRef"] == {"name": "tamesu-store", "key": "url"}
        return url

    environment = {entry["name"]: value(entry) for entry in container["env"]}
    names = [f"t{i}" for i in range(8)]
    (tmp_path / "project").mkdir()
    root = project(tmp_path / "project", agent_url, "".join(f"""\
  - name: {name}
    target: bot
    scenario: {{ script: [ {{ say: hi }} ] }}
    assert: [ {{ contains: "echo: hi" }} ]
""" for name in names))
    command = container["command"]
    assert command[0] == "tamesu"
    pods = []
    for index in range(spec["completions"]):
        own_root = tmp_path / f"pod-{index}"  # each pod has a filesystem of its own: its /tmp lives here
        args = [str(own_root) + arg if arg.startswith("/") else arg for arg in command[1:]]
        pods.append(subprocess.Popen(
            [sys.executable, "-m", "tamesu", *args], cwd=root, text=True, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NO_COLOR": "1", **environment, "JOB_COMPLETION_INDEX": str(index)}))
    outputs = [pod.communicate(timeout=120)[0] for pod in pods]
    assert [pod.returncode for pod in pods] == [0] * len(pods), outputs
    assert not any("warning" in output for output in outputs), outputs
    store = Store(store_url(url, root, environ={}))
    [run] = Reader(store).runs()
    shards = [f"{i}/{len(pods)}" for i in range(1, len(pods) + 1)]
    assert run.id == job["metadata"]["name"] and run.shards == shards and run.finished
    assert run.counts["passed"] == len(names)
    with TestClient(create_app(store)) as view:
        runs_page, run_page = view.get("/"), view.get("/run", params={"id": run.id})
    assert runs_page.status_code == run_page.status_code == 200
    assert runs_page.text.count(", ".join(shards)) == 1  # one run, its four parts
    assert all(f"suite/{name}" in run_page.text for name in names)
    store.close()


JSONL_CASES = (
    '{"id": "greets", "input": "hello", "assert": [{"type": "contains", "value": "echo: hello"}]}\n'
    '{"id": "wrong", "input": "hi", "assert": [{"type": "contains", "value": "nope"}]}\n'
    '{"id": "talks", "turns": [{"input": "one"}, {"input": "two"}], "assert": [{"type": "contains", '
    '"value": "echo: two"}]}\n')


def test_tamesu_test_writes_each_case_to_the_store_live_and_import_gives_back_the_same(
        tmp_path: Path, tamesu, agent_url: str, url: str) -> None:
    (tmp_path / "cases.jsonl").write_text(JSONL_CASES)
    env = {"TAMESU_STORE": url, "TAMESU_COMMIT": "c0ffee2", "TAMESU_BRANCH": "main"}
    ran = tamesu(["test", "-i", "cases.jsonl", "-n", f"{agent_url}/chat", "--out", "out"], cwd=tmp_path, env=env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "warning" not in ran.stdout + ran.stderr
    reader = Reader(Store(store_url(url, tmp_path, environ={})))
    [run] = reader.runs()
    assert run.counts["passed"] == 2 and run.counts["failed"] == 1 and run.finished and run.exit_code == 1
    assert run.commit == "c0ffee2" and run.branch == "main"
    [run_dir] = (tmp_path / "out").iterdir()
    assert run.dirs == [str(run_dir.resolve())]
    [failed] = reader.history("cases/wrong")
    assert failed.status == "failed"
    assert failed.runs[0].transcript == [{"role": "user", "text": "hi", "turn": 1},
                                         {"role": "agent", "text": "echo: hi", "turn": 1}]
    assert failed.runs[0].assertions[0]["passed"] is False
    [talks] = reader.history("cases/talks")
    assert [m["text"] for m in talks.runs[0].transcript] == ["one", "echo: one", "two", "echo: two"]

    # the run folder imported into a fresh store reads back as the live writes did
    copy_url = f"sqlite:///{tmp_path / 'copy.db'}"
    imported = tamesu(["store", "import", "out", "--store", copy_url], cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    copy = Reader(Store(copy_url))
    [back] = copy.runs()
    assert (back.id, back.commit, back.branch, back.counts) == (run.id, run.commit, run.branch, run.counts)
    live_run, back_run = reader.as_loaded_run(run.id), copy.as_loaded_run(run.id)
    assert live_run is not None and back_run is not None
    assert [r.model_dump() for r in back_run.results] == [r.model_dump() for r in live_run.results]
    assert [(r.transcript, r.assertions, r.metrics) for r in copy.history("cases/talks")[0].runs] == \
        [(r.transcript, r.assertions, r.metrics) for r in talks.runs]


def test_a_killed_tamesu_test_has_its_finished_cases_in_the_store(tmp_path: Path, agent_url: str) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "cases.jsonl").write_text("".join(
        f'{{"id": "slow{i}", "input": "slow 1", "assert": [{{"type": "contains", "value": "finally"}}]}}\n'
        for i in range(8)))
    reader = _killed_once_two_are_stored(["test", "-i", "cases.jsonl", "-n", f"{agent_url}/chat", "--out", "out"],
                                         tmp_path, url)
    run = reader.runs()[0]
    assert not run.finished and run.exit_code is None
    assert 2 <= run.counts["passed"] == run.counts["total"] < 8


def test_doctor_says_whether_the_store_is_reachable(tmp_path: Path, tamesu, agent_url: str) -> None:
    root = project(tmp_path, agent_url, TWO_TESTS)
    assert "results store: off" in tamesu(["doctor"], cwd=root, env={"TAMESU_STORE": "off"}).stdout
    before = tamesu(["doctor"], cwd=root).stdout
    assert "(history on by default), created by the first run" in before and not (root / ".tamesu").exists()
    tamesu(["run", "--out", "out"], cwd=root)
    ready = tamesu(["doctor"], cwd=root)
    assert "ok    results store sqlite:///" in ready.stdout and "reachable, up to date" in ready.stdout
    down = tamesu(["doctor"], cwd=root, env={"TAMESU_STORE": "postgresql://me:hunter2@127.0.0.1:1/x"})
    assert "FAIL  results store postgresql+psycopg://me:***@127.0.0.1:1/x: cannot connect" in down.stdout
    assert "hunter2" not in down.stdout + down.stderr and down.returncode == 3


def test_judge_drift_and_flakiness_read_the_same_on_both_backends(url: str) -> None:
    from tamesu.conversation import AgentTurn, UserTurn
    from tamesu.results.records import AssertionResult, RunResult, RunSummary, TestResult, TurnRecord
    from tamesu.store.db import PartInfo, RunInfo

    store = Store(store_url(url, Path.cwd(), environ={}))
    store.migrate()

    def write(run_id: str, when: str, model: str, passed: bool, score: float, said: str) -> None:
        run = RunInfo(id=run_id, started_at=when, commit="same")
        part = store.begin_part(run, PartInfo(dir=f"/runs/{run_id}", started_at=when))
        verdict = AssertionResult(name="judge", passed=passed, score=score, reason=f"{model} says {passed}",
                                  model=model, prompt_version="judge.v1")
        detail = RunResult(suite="s", test="refund", run=1, status="passed" if passed else "failed",
                           started_at=when, target="bot", target_type="rest", assertions=[verdict],
                           turns=[TurnRecord(index=1, user=UserTurn(text="refund please"),
                                             agent=AgentTurn(text=said))])
        result = TestResult(suite="s", test="refund", id="s/refund", target="bot",
                            status="passed" if passed else "failed", passed_runs=int(passed), total_runs=1,
                            runs=[RunSummary(run=1, status=detail.status, dir="s/refund/run-1")])
        store.write_test(run, part, result, [detail])
        store.finish_part(part, when, 0 if passed else 1, {"total": 1}, None)

    write("r1", "2026-01-01T00:00:00", "fake:strict", False, 2.0, "Refund RF-1 is on its way")
    write("r2", "2026-01-02T00:00:00", "fake:lenient", True, 5.0, "Refund RF-1 is on its way")
    write("r3", "2026-01-03T00:00:00", "fake:lenient", True, 5.0, "Something else entirely")
    reader = Reader(store)
    [case] = reader.drift()
    assert case.test_id == "s/refund" and case.assertion == "judge"
    assert [(v["run_id"], v["model"], v["passed"], v["score"]) for v in case.verdicts] == [
        ("r1", "fake:strict", False, 2.0), ("r2", "fake:lenient", True, 5.0)]
    assert case.transcript[1]["text"] == "Refund RF-1 is on its way"
    [row] = reader.tests()
    assert row.flaky_commits == ["same"] and row.results == 3 and row.passed == 2
    assert [r.id for r in reader.runs()] == ["r3", "r2", "r1"]
    store.close()


def test_a_quarantined_test_that_passed_then_errored_is_not_flaky(url: str) -> None:
    # a quarantined test is `quarantined` whatever its run did: one that passed, then could not reach its agent,
    # was called flaky on that commit (an error is the environment's); one whose run failed still is
    from tamesu.results.records import RunResult, RunStatus, RunSummary, TestResult
    from tamesu.store.db import PartInfo, RunInfo

    store = Store(store_url(url, Path.cwd(), environ={}))
    store.migrate()

    def write(run_id: str, when: str, runs: dict[str, RunStatus]) -> None:
        run = RunInfo(id=run_id, started_at=when, commit="same")
        part = store.begin_part(run, PartInfo(dir=f"/runs/{run_id}", started_at=when))
        for name, ran in runs.items():
            error = "cannot reach the agent" if ran == "error" else None
            detail = RunResult(suite="s", test=name, run=1, status=ran, started_at=when, target="bot",
                               target_type="rest", error=error)
            result = TestResult(suite="s", test=name, id=f"s/{name}", target="bot", quarantine="SHOP-7",
                                status="passed" if ran == "passed" else "quarantined",
                                passed_runs=int(ran == "passed"), total_runs=1,
                                runs=[RunSummary(run=1, status=ran, dir=f"s/{name}/run-1", error=error)])
            store.write_test(run, part, result, [detail])
        store.finish_part(part, when, 0, {"total": len(runs)}, None)

    write("r1", "2026-01-01T00:00:00", {"stream": "passed", "lookup": "passed"})
    write("r2", "2026-01-02T00:00:00", {"stream": "error", "lookup": "failed"})
    flaky = {row.test_id: row.flaky_commits for row in Reader(store).tests()}
    assert flaky == {"s/stream": [], "s/lookup": ["same"]}, flaky
    store.close()


def test_an_empty_tamesu_store_is_unset_and_off_turns_the_files_store_off(tmp_path: Path, tamesu,
                                                                          agent_url: str) -> None:
    root = project(tmp_path, agent_url, TWO_TESTS[TWO_TESTS.index("  - name: echo"):])  # the steady one
    (root / "tamesu.yaml").write_text((root / "tamesu.yaml").read_text() + "store: true\n")
    database = root / ".tamesu" / "store.db"
    off = tamesu(["run", "--out", "out"], cwd=root, env={"TAMESU_STORE": "off"})
    assert off.returncode == 0, off.stdout + off.stderr
    assert not database.exists()
    # an empty variable (a CI file's `TAMESU_STORE=`) is no setting at all: tamesu.yaml's store: true stands
    empty = tamesu(["run", "--out", "out"], cwd=root, env={"TAMESU_STORE": ""})
    assert empty.returncode == 0, empty.stdout + empty.stderr
    runs = Reader(Store(store_url(True, root, environ={}))).runs()
    assert len(runs) == 1 and runs[0].counts["passed"] == 1
    assert store_url(True, root, environ={"TAMESU_STORE": "  "}) == store_url(True, root, environ={})
    assert store_url(True, root, environ={"TAMESU_STORE": "off"}) is None


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_a_bad_store_timeout_is_one_line_before_anything_runs(tmp_path: Path, tamesu, agent_url: str,
                                                              value: str) -> None:
    root = project(tmp_path, agent_url, TWO_TESTS[TWO_TESTS.index("  - name: echo"):])
    done = tamesu(["run", "--out", "out"], cwd=root, env={"TAMESU_STORE": "true", "TAMESU_STORE_TIMEOUT": value})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == f"TAMESU_STORE_TIMEOUT: expected a number of seconds above 0, got {value!r}"
    assert not (root / "out").exists() or not any((root / "out").iterdir())
