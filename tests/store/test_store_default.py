"""History on by default (issue 32, item 1): with no configuration at all, every run goes into the project's
SQLite store, the console's last line points to `tamesu view` once it holds two runs, and `tamesu view` lists
them; `store: false` and `TAMESU_STORE=off` write nothing; a folder the store cannot be made in is a warning,
never a failed run."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from lifeline import tied


async def _chat(request: Request) -> JSONResponse:
    return JSONResponse({"text": f"echo: {(await request.json()).get('message', '')}"})


@pytest.fixture
def agent_url(serve) -> str:
    return serve(Starlette(routes=[Route("/chat", _chat, methods=["POST"])])).url


def _suite(folder: Path, agent_url: str) -> Path:
    """A suite file alone: no tamesu.yaml, no store setting, no environment."""
    (folder / "shop.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{agent_url}/chat' }}\n"
        "tests:\n  - name: echo\n    target: bot\n    scenario: { script: [ { say: hello } ] }\n"
        "    assert: [ { contains: 'echo: hello' } ]\n")
    return folder


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **extra}
    for name in ("TAMESU_STORE", "TAMESU_DEBUG", "TAMESU_RUN_ID"):
        if name not in extra:
            env.pop(name, None)
    return env


def _run(folder: Path, *args: str, as_user: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    """`tamesu ARGS` forked from the warm zygote (tests/forked.py); `as_user`: file modes hold even for root."""
    return forked.run(list(args), folder, _env(**env), 120, as_user=as_user)


def test_two_runs_then_view_lists_both_with_no_configuration(tmp_path: Path, agent_url: str) -> None:
    folder = _suite(tmp_path, agent_url)
    first = _run(folder, "run", "shop.yaml")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "tamesu view" not in first.stdout  # one run is no history yet
    second = _run(folder, "run", "shop.yaml")
    assert second.returncode == 0, second.stdout + second.stderr
    database = folder / ".tamesu" / "store.db"
    assert second.stdout.rstrip().splitlines()[-1] == (
        f"history: 2 runs in {database}; `tamesu view` shows them (flaky tests, trends, comparisons)")
    run_ids = sorted(p.name for p in (folder / "tamesu-runs").iterdir())
    assert len(run_ids) == 2
    # a fork of the warm zygote through its launcher (tests/forked.py), SIGINT passed on
    view = subprocess.Popen(tied([*forked.tamesu_command(), "view", "--port", "0", "--no-open"]), cwd=folder,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert view.stdout is not None
        line = view.stdout.readline()
        assert line.startswith("tamesu view: http://127.0.0.1:") and str(database) in line, line
        page = httpx.get(line.split()[2], timeout=10)
        assert page.status_code == 200
        assert all(run_id in page.text for run_id in run_ids), page.text[:2000]
    finally:
        view.send_signal(signal.SIGINT)
        try:
            view.wait(timeout=10)
        except subprocess.TimeoutExpired:
            view.kill()
            view.wait()


@pytest.mark.parametrize("off", ["store: false", "TAMESU_STORE=off"])
def test_store_false_or_off_writes_nothing(off: str, tmp_path: Path, agent_url: str) -> None:
    folder = _suite(tmp_path, agent_url)
    env = {}
    if off.startswith("store"):
        (folder / "tamesu.yaml").write_text(f"{off}\n")
    else:
        env["TAMESU_STORE"] = "off"
    for _ in range(2):
        done = _run(folder, "run", "shop.yaml", **env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "history" not in done.stdout and "tamesu view" not in done.stdout
    assert not (folder / ".tamesu").exists()
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["shop.yaml", "tamesu-runs", *(["tamesu.yaml"] if off.startswith("store") else [])])


def test_a_folder_the_default_store_cannot_be_made_in_is_a_warning(tmp_path: Path, agent_url: str) -> None:
    (tmp_path / "checkout").mkdir()
    folder = _suite(tmp_path / "checkout", agent_url)
    folder.chmod(0o555)  # a read-only checkout: runs write elsewhere (--out)
    try:
        done = _run(folder, "run", "shop.yaml", "--out", str(tmp_path / "runs"), as_user=True)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"warning: history is off for this run: cannot create {folder / '.tamesu'}: Permission denied" \
        in done.stdout, done.stdout
    assert "1 passed" in done.stdout and not (folder / ".tamesu").exists()


@pytest.mark.parametrize("where", ["store: maybe", "TAMESU_STORE=maybe"])
def test_a_store_setting_that_is_a_word_not_a_file_is_refused(where: str, tmp_path: Path, agent_url: str) -> None:
    # `store: maybe` made a SQLite file named `maybe` beside tamesu.yaml
    folder = _suite(tmp_path, agent_url)
    env = {}
    if where.startswith("store"):
        (folder / "tamesu.yaml").write_text(f"{where}\n")
        checked = _run(folder, "validate")
        assert checked.returncode == 2, checked.stdout + checked.stderr
        assert "tamesu.yaml:1:8: store: 'maybe' is no store: give true" in checked.stdout + checked.stderr
    else:
        env["TAMESU_STORE"] = "maybe"
    done = _run(folder, "run", "shop.yaml", **env)
    assert done.returncode == 2, done.stdout + done.stderr
    name = "store" if where.startswith("store") else "TAMESU_STORE"
    assert f"{name}: 'maybe' is no store" in done.stdout + done.stderr
    assert not (folder / "maybe").exists() and not (folder / "tamesu-runs").exists()


def test_a_configured_store_whose_folder_cannot_be_made_is_a_warning(tmp_path: Path, agent_url: str) -> None:
    # before: only "[Errno 2] No such file or directory: '/proc/nope'", exit 2, and no test ran
    folder = _suite(tmp_path, agent_url)
    done = _run(folder, "run", "shop.yaml", TAMESU_STORE="/proc/nope/history.db")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("warning: store: cannot write to sqlite:////proc/nope/history.db: No such file or directory; history is "
            "off for this run") in done.stdout, done.stdout
    assert "1 passed" in done.stdout
