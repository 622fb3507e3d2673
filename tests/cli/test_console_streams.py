"""A console that goes away, or cannot write a character, never ends a run: `tamesu run | head` ran two of four
tests, wrote no report and exited 1 without a word (click swallows a broken pipe); an agent's emoji on an ASCII
console was `internal error`, exit 3, and the results file was never written."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import forked
from conftest import run_tamesu
from lifeline import tied

REPLY = "Ok \U0001f44d café"


def _agent(serve: Any, delay_s: float) -> str:
    async def chat(request: Request) -> JSONResponse:
        await request.json()
        await asyncio.sleep(delay_s)
        return JSONResponse({"reply": REPLY})

    return str(serve(Starlette(routes=[Route("/chat", chat, methods=["POST"])])).url)


def _suite(folder: Path, url: str, names: list[str], expect: str) -> None:
    tests = "".join(f"  - name: {name}\n    target: bot\n    scenario: {{ script: [{{ say: hi }}] }}\n"
                    f"    assert: [{{ contains: '{expect}' }}]\n" for name in names)
    (folder / "s.tamesu.yaml").write_text(
        f"targets:\n  bot: {{ type: rest, url: '{url}/chat', request: {{ body: {{ message: '{{{{message}}}}' }} }},"
        f" response: {{ text: $.reply }} }}\ntests:\n{tests}", encoding="utf-8")


def _only_run(out: Path) -> Path:
    (run,) = out.iterdir()
    return run


def _head_one(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[bytes, int, str]:
    """`tamesu ARGS | head -1`: the first line, then the reader goes; the exit code and what stderr said."""
    process = subprocess.Popen(tied([*forked.tamesu_command(), *args]), cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()
        code = process.wait(timeout=60)
        return first, code, process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_reader_that_stops_reading_stops_the_console_not_the_run(tmp_path: Path, serve: Any) -> None:
    _suite(tmp_path, _agent(serve, 0.3), ["one", "two", "three", "four"], "café")
    env = {**os.environ, "NO_COLOR": "1"}
    first, code, said = _head_one(["run", "s.tamesu.yaml", "--out", "out"], tmp_path, env)
    assert first.startswith(b"tamesu running 4 tests"), first
    assert code == 0, said  # every test passed: the verdict, not the console, decides
    assert said.splitlines() == ["tamesu: stdout can no longer be written (Broken pipe): what follows is not shown; "
                                 "the run goes on and writes its results and reports"], said
    run = _only_run(tmp_path / "out")
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(line["test"] for line in lines) == ["four", "one", "three", "two"]
    assert json.loads((run / "run.json").read_text())["counts"]["total"] == 4
    assert (run / "report.html").is_file()


def test_a_character_the_console_cannot_write_is_escaped(tmp_path: Path, serve: Any, tamesu: Any) -> None:
    _suite(tmp_path, _agent(serve, 0.0), ["plain", "thumbs \U0001f44d"], "\U0001f44e")  # both fail: not said
    done = tamesu(["run", "s.tamesu.yaml", "--out", "out", "-vv"], cwd=tmp_path,
                  env={"PYTHONIOENCODING": "ascii"})  # a console that writes ASCII only
    assert done.returncode == 1, done.stdout + done.stderr  # two failed tests, not an internal error (3)
    assert "internal error" not in done.stderr and done.stderr == "", done.stderr
    assert "agent Ok \\U0001f44d caf\\xe9" in done.stdout, done.stdout
    assert "FAIL  s/thumbs \\U0001f44d" in done.stdout and "0 passed, 2 failed" in done.stdout, done.stdout
    run = _only_run(tmp_path / "out")
    names = [json.loads(line)["test"] for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(names) == ["plain", "thumbs \U0001f44d"]  # the files keep the text as it was


def test_a_listing_whose_reader_stops_ends_quietly(tmp_path: Path, serve: Any) -> None:
    # `tamesu list | head -1`: before, "stdout can no longer be written ... the run goes on and writes its results
    # and reports", of a command that runs nothing
    _suite(tmp_path, "http://127.0.0.1:9", [f"test {n}" for n in range(3000)], "x")
    first, code, said = _head_one(["list"], tmp_path, {**os.environ, "NO_COLOR": "1"})
    assert first.startswith(b"s/test 0"), first
    assert code == 0 and said == "", said


def test_terminal_escapes_in_names_and_answers_are_shown_not_acted_on(tmp_path: Path) -> None:
    # a test named with an ANSI colour and a bell, an agent answering "clear the screen": run -v and list wrote the
    # raw ESC and BEL bytes, which the terminal acted on
    (tmp_path / "esc.yaml").write_text(
        'targets:\n  bot: { type: model, model: bot }\n'
        'models:\n  bot: { provider: fake, rules: [ { when: hi, say: "hello \\e[2J" } ] }\n'
        'tests:\n  - { name: "a\\e[31mRED\\a", scenario: { script: [ { say: hi } ] },\n'
        '      assert: [ { contains: zzz } ] }\n')
    for args in (["run", "esc.yaml", "--out", "out", "-v"], ["list", "esc.yaml"]):
        done = run_tamesu(args, cwd=tmp_path)
        output = done.stdout + done.stderr
        assert "\x1b" not in output and "\x07" not in output, repr(output)
        assert "a\\x1b[31mRED" in output, output
    assert "hello \\x1b[2J" in run_tamesu(["run", "esc.yaml", "--out", "out", "-v"], cwd=tmp_path).stdout


def test_a_transcript_lines_of_several_lines_stay_under_their_first(tmp_path: Path) -> None:
    # `-vv`: a reply of several lines (and a turn's file names) printed its later lines at the margin, where they
    # read as tamesu's own lines
    (tmp_path / "multi.yaml").write_text(
        'targets:\n  bot: { type: model, model: bot }\n'
        'models:\n  bot: { provider: fake, rules: [ { when: hi, say: "first line\\nsecond line" } ] }\n'
        'tests:\n  - { name: two lines, scenario: { script: [ { say: hi } ] }, assert: [ { contains: zzz } ] }\n')
    done = run_tamesu(["run", "multi.yaml", "--out", "out", "-vv"], cwd=tmp_path)
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.endswith("agent first line"))
    assert lines[first + 1] == " " * 12 + "second line", lines[first:first + 2]


def test_a_huge_answer_in_a_transcript_is_cut_saying_so(tmp_path: Path) -> None:
    # `-vv`: a 1 MB answer was printed whole, burying the run's verdicts
    (tmp_path / "huge.yaml").write_text(
        'targets:\n  bot: { type: model, model: bot }\n'
        'models:\n  bot: { provider: fake, rules: [ { when: hi, say: "' + "word " * 20000 + 'end" } ] }\n'
        'tests:\n  - { name: huge, scenario: { script: [ { say: hi } ] }, assert: [ { contains: zzz } ] }\n')
    done = run_tamesu(["run", "huge.yaml", "--out", "out", "-vv", "--color", "never"], cwd=tmp_path)
    [line] = [line for line in done.stdout.splitlines() if line.lstrip().startswith("agent word")]
    assert line.endswith(" … (cut: 4000 of 100003 characters shown; transcript.json has it whole)"), line[-200:]
    assert len(done.stdout) < 20000, len(done.stdout)
