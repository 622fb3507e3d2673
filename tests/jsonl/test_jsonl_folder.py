"""`tamesu test -i FOLDER`: every JSONL file of the folder, in name order, against one agent (a local REST echo
agent here), each file a suite of its own: test ids are `<file stem>/<case id>`, so two files may use the same
case id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def _echo() -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"reply": f"echo: {(await request.json()).get('message', '')}"})

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


def _case(case_id: str, said: str, expected: str) -> str:
    return json.dumps({"id": case_id, "input": said, "assertions": [{"type": "contains", "value": expected}]}) + "\n"


def _folder(tmp_path: Path, url: str) -> Path:
    (tmp_path / "tamesu.yaml").write_text(f"targets:\n  echo: {{ type: rest, url: '{url}/chat' }}\n")
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "b.jsonl").write_text(_case("greet", "hello", "echo: goodbye"))  # fails: the agent echoes hello
    (folder / "a.jsonl").write_text(_case("greet", "hi", "echo: hi") + _case("bye", "bye", "echo: bye"))
    (folder / "a.ndjson").write_text(_case("greet", "hey", "echo: hey"))  # the same stem as a.jsonl
    (folder / "notes.txt").write_text("not a case")
    (folder / "suite.yaml").write_text("tests: []\n")  # a folder's YAML is not JSONL: not read here
    return tmp_path


def test_every_jsonl_file_of_the_folder_runs_in_name_order(serve: Any, tamesu: Any, tmp_path: Path) -> None:
    project = _folder(tmp_path, serve(_echo()).url)
    done = tamesu(["test", "-i", "cases", "-n", "echo", "--out", "out", "-o", "records.jsonl"], cwd=project)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said  # b/greet failed
    [run] = (project / "out").iterdir()
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    # one suite per file; a stem two files share is told apart by the file's whole name
    assert sorted(f"{line['suite']}/{line['test']}" for line in lines) == [
        "a.jsonl/bye", "a.jsonl/greet", "a.ndjson/greet", "b/greet"]
    statuses = {f"{line['suite']}/{line['test']}": line["status"] for line in lines}
    assert statuses["b/greet"] == "failed" and statuses["a.ndjson/greet"] == "passed"
    assert (run / "b" / "greet" / "run-1" / "result.json").is_file()
    # the records name the file each case came from, in the order the files are read
    records = [json.loads(line) for line in (project / "records.jsonl").read_text().splitlines()]
    assert sorted((r["file"], r["id"], r["status"]) for r in records) == [
        ("cases/a.jsonl", "bye", "passed"), ("cases/a.jsonl", "greet", "passed"),
        ("cases/a.ndjson", "greet", "passed"), ("cases/b.jsonl", "greet", "failed")]
    assert "[cases/b.jsonl: greet]" in done.stdout, done.stdout
    listed = tamesu(["test", "-i", "cases", "-n", "echo", "--dry-run"], cwd=project)
    assert listed.returncode == 0, listed.stderr
    shown = [line.strip().split("]")[0] + "]" for line in listed.stdout.splitlines() if line.startswith("  [")]
    assert shown == ["[cases/a.jsonl: greet]", "[cases/a.jsonl: bye]", "[cases/a.ndjson: greet]",
                     "[cases/b.jsonl: greet]"]
    assert "Input: cases (4 test cases)" in listed.stdout


def test_a_folder_says_every_files_problems_or_that_it_has_no_jsonl(tamesu: Any, tmp_path: Path) -> None:
    project = _folder(tmp_path, "http://127.0.0.1:9")
    (project / "cases" / "a.jsonl").write_text('{"id": "x", "input": "hi"\n')
    (project / "cases" / "b.jsonl").write_text(json.dumps({"id": "y", "input": "hi", "max_turns": 0}) + "\n")
    bad = tamesu(["test", "-i", "cases", "-n", "echo", "--dry-run"], cwd=project)
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "cases/a.jsonl:1:26: not valid JSON: Expecting ',' delimiter (the file ends before the value does)",
        "cases/b.jsonl:1:41: max_turns: input should be greater than or equal to 1, got 0", "2 problems found"]
    (project / "empty").mkdir()
    none = tamesu(["test", "-i", "empty", "-n", "echo"], cwd=project)
    assert none.returncode == 2
    assert none.stderr.splitlines() == ["empty:1:1: no JSONL files in the folder (.jsonl or .ndjson)",
                                        "1 problem found"]


def test_records_are_never_written_over_the_cases_they_come_from(serve: Any, tamesu: Any, tmp_path: Path) -> None:
    project = _folder(tmp_path, serve(_echo()).url)
    cases = (project / "cases" / "a.jsonl").read_text()
    (project / "link.jsonl").symlink_to("cases/a.jsonl")
    for args, said in [
        (["-i", "cases/a.jsonl", "-o", "cases/a.jsonl"], "-o cases/a.jsonl is the input file cases/a.jsonl"),
        (["-i", "cases/a.jsonl", "-o", "link.jsonl"], "-o link.jsonl is the input file cases/a.jsonl"),
        (["-i", "cases/a.jsonl", "--dry-run", "-o", "./cases/a.jsonl"], "-o cases/a.jsonl is the input file"),
        (["-i", "cases", "-o", "cases/b.jsonl"], "-o cases/b.jsonl is the input file cases/b.jsonl"),
        (["-i", "cases/a.jsonl", "--report", "junit:cases/a.jsonl"], "--report junit:cases/a.jsonl is the input"),
    ]:
        done = tamesu(["test", *args, "-n", "echo", "--out", "out"], cwd=project)
        assert done.returncode == 2, done.stdout + done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"tamesu test: {said}") and line.endswith("would replace the test cases; write "
                                                                         "elsewhere"), line
        assert (project / "cases" / "a.jsonl").read_text() == cases  # untouched: nothing ran
    # a new file in a folder read whole: written, and the next run of the folder would read it as cases
    done = tamesu(["test", "-i", "cases", "-n", "echo", "--out", "out", "-o", "cases/records.jsonl"], cwd=project)
    assert done.returncode == 1, done.stdout + done.stderr  # b/greet fails, as above
    assert ("warning: -o cases/records.jsonl is written in the input folder cases: the next `tamesu test -i cases` "
            "will read it as test cases") in done.stderr.splitlines(), done.stderr
    assert len((project / "cases" / "records.jsonl").read_text().splitlines()) == 4


def test_a_folder_whose_files_share_ids_is_not_written_into_one_file(tamesu: Any, tmp_path: Path) -> None:
    # before: `--dry-run -o all.jsonl` wrote both `greet` cases, and the file it wrote did not load back
    # ("all.jsonl:2:8: id: another test case has id 'greet' (line 1)")
    project = _folder(tmp_path, "http://127.0.0.1:9")
    done = tamesu(["test", "-i", "cases", "-n", "echo", "--dry-run", "-o", "all.jsonl"], cwd=project)
    assert (done.returncode, done.stderr) == (2, "tamesu test: -o all.jsonl: the folder's files share case ids "
                                                 "(greet (cases/a.jsonl, cases/a.ndjson, cases/b.jsonl)), which one "
                                                 "file cannot hold: give -i one file at a time\n"), done.stdout
    assert not (project / "all.jsonl").exists()
    (project / "cases" / "a.ndjson").unlink()
    (project / "cases" / "b.jsonl").write_text(_case("hello", "hello", "echo: hello"))
    done = tamesu(["test", "-i", "cases", "-n", "echo", "--dry-run", "-o", "all.jsonl"], cwd=project)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in (project / "all.jsonl").read_text().splitlines()] == [
        "greet", "bye", "hello"]
    assert tamesu(["validate", "all.jsonl", "-n", "echo"], cwd=project).returncode == 0
