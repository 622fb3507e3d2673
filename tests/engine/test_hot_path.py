"""The cheaper paths a run takes per test and per turn write and read exactly what the slower ones did."""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from pydantic import BaseModel
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from tamesu.engine.artifacts import RunDirectory, indented_json
from tamesu.errors import ConfigError
from tamesu.suite import _fast_yaml
from tamesu.suite.secrets import Redactor
from tamesu.suite.yaml_reader import MAX_VALUES, Document, _parser, load_yaml, to_plain


def test_write_json_twice_in_one_folder(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, Redactor())
    run = tmp_path / "suite" / "test" / "run-1"
    directory.write_json(run / "transcript.json", {"lines": [{"text": "hi"}]})
    directory.write_json(run / "result.json", {"status": "passed"})
    assert json.loads((run / "transcript.json").read_text()) == {"lines": [{"text": "hi"}]}
    assert (run / "result.json").read_text() == '{\n  "status": "passed"\n}\n'
    assert sorted(p.name for p in run.iterdir()) == ["result.json", "transcript.json"]


DOCUMENTS = [
    {"turns": [{"user": {"text": "où est ma commande ? \u2028 <b>&</b>", "files": []}, "agent": {
        "raw": [{"nested": {"deep": [1, 2.5, -0.0, True, None, 12345678901234567890]}}], "ms": 1.25}}],
     "empty": {}, "none": [], "control": "tab\tnew\nline\u0000\u001f", "quote": "\"\\/"},
    [], {}, "text", 0, [[[]]], {"a": [{}]},
]


@pytest.mark.parametrize("data", DOCUMENTS)
def test_indented_json_writes_the_text_json_dumps_does(data: Any) -> None:
    assert indented_json(data).decode("utf-8") == json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def test_write_json_masks_secrets_and_refuses_what_utf8_cannot_hold(tmp_path: Path) -> None:
    redactor = Redactor()
    redactor.add("s3cr3t-value")
    directory = RunDirectory(tmp_path, redactor)
    directory.write_json(tmp_path / "r.json", {"said": "the key is s3cr3t-value", "n": [1.5]})
    assert json.loads((tmp_path / "r.json").read_text()) == {"said": "the key is ***", "n": [1.5]}
    with pytest.raises(ValueError):  # a lone surrogate from an agent's JSON: as json.dumps + utf-8 refused it
        directory.write_json(tmp_path / "s.json", {"said": json.loads('"\\ud800"')})


YAML_TEXTS = [
    "targets:\n  bot: { type: rest, url: 'http://x/chat' }  # trailing\n# a comment line\ntests:\n"
    "  - name: a\n    target: bot\n    scenario: { max_turns: 2, script: [ { say: hi }, { say: 'there' } ] }\n"
    "  - name: b\n    vars:\n      k: |\n        block # not a comment\n      f: 1.5\n",
    "a:\n  - 1\n  -   x: [1, {y: 2}]\n      z: ~\n",
]


@pytest.mark.parametrize("text", YAML_TEXTS)
def test_yaml_positions_match_the_round_trip_reader(tmp_path: Path, text: str) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    document = load_yaml(path)
    reference = YAML(typ="rt").load(text)
    assert document.data == json.loads(json.dumps(reference))

    def walk(node: Any, loc: list[Any]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                assert document.position([*loc, key], key=True) == tuple(x + 1 for x in node.lc.key(key))
                assert document.position([*loc, key]) == tuple(x + 1 for x in node.lc.value(key))
                walk(value, [*loc, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                assert document.position([*loc, index]) == tuple(x + 1 for x in node.lc.item(index))
                walk(value, [*loc, index])

    walk(reference, [])


ROOT = Path(__file__).resolve().parents[2]
# the project's own files only: not what `npm ci` (tests/js/node_modules) or a run (tamesu-runs) left there, so the
# seeded fuzzer below draws the same mutants on a fresh clone as on a developer's machine
_NOT_OURS = {".venv", "node_modules", "tamesu-runs"}
REPO_YAML = sorted(p for p in [*ROOT.glob("examples/**/*.y*ml"), *ROOT.glob("tests/**/*.y*ml"),
                               *ROOT.glob("src/**/*.y*ml")] if not _NOT_OURS & set(p.relative_to(ROOT).parts))
TRICKY = [
    "a: yes\nb: on\nc: no\nd: off\ne: y\nf: true\ng: False\nh: ~\nj: null\n",
    "n: [0, -0, +5, 12, 1.5, -0.25, 10.0, '5', \"6\"]\nk: {1: one, 2.5: x, false: f}\n",
    "s: >\n  folded\n  text\n\nt: |-\n  kept\n   indented\nu: 'it''s'\nv: \"tab\\there \\u00e9\"\n",
    "- [a, {b: c}, [d]]\n- {}\n- []\n- ''\n- key: value\n  other: 2\n",
    "say: Hello there! how are you?  # a comment\nurl: http://x:8080/a?b=c#frag\nemoji: \"\U0001F600\"\n",
    "tests:\n- name: t\n  scenario:\n    script:\n    - say: hi\n    -   say: 'there'\n  assert: []\n",
    "5",
    "just a string",
    "b: \"\\/ \\L \\x41\\U0001F600\"\nc: |\n  x\n\n\n",
    "? a\n: b\n",
    "- - - x\n",
]
DECLINED = [
    "a: &x 1\nb: *x\n", "a: !!str 5\n", "base: &b {x: 1}\nc:\n  <<: *b\n", "a: 0x1f\n", "a: 1e3\n",
    "a: 2026-01-01\n", "a: 007\n", "a: .inf\n", "a: 1_000\n", "%YAML 1.1\n---\na: yes\n", "a: 1\na: 2\n",
    "? [a, b]\n: c\n", "a: 1\n---\nb: 2\n", "a: 1\n---\n", "~: x\n", "a:\nb: 1\n", "on:\n  push:\n",
    "- a\n-\n", "a: [1, 2\n", "a: =\n", "a: 1.\n", "~\n", "null\n", "a: b\tc\n", "\ta: 1\n", "a: x\u2028y\n",
    "a: x\x85y\n", "a: @x\n", "a: 'x\u2028y'\nb: 1\n", "a: \"x\u2029y\"\n",
]


def _slow(text: str) -> tuple[Any, Any]:
    """What load_yaml makes with ruamel (a null document is an empty mapping there)."""
    tree = _parser().load(text)
    tree = tree if tree is not None else CommentedMap()
    return tree, to_plain(tree)


def _typed(value: Any) -> Any:
    """The value with each scalar's built-in type beside it, so 1, 1.0 and True are told apart (ruamel's float
    keys stay its ScalarFloat, a float)."""
    if isinstance(value, dict):
        return {_kind(k): _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return _kind(value)


def _kind(value: Any) -> tuple[str, Any]:
    base = next((t for t in (bool, int, float, str) if isinstance(value, t)), type(value))
    return base.__name__, value


def _positions(tree: Any) -> list[Any]:
    found: list[Any] = []

    def walk(node: Any, loc: tuple[Any, ...]) -> None:
        if hasattr(node, "lc"):
            found.append((loc, "node", node.lc.line, node.lc.col))
        if isinstance(node, dict):
            for key, value in node.items():
                found.append((loc, key, tuple(node.lc.key(key)), tuple(node.lc.value(key))))
                walk(value, (*loc, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                found.append((loc, index, tuple(node.lc.item(index))))
                walk(value, (*loc, index))

    walk(tree, ())
    return found


def _placed(document: Document, tree: Any) -> list[Any]:
    """Where `document` places every key, value and item of ruamel's `tree` of the same text, and what is not there
    (a key or an item past the end, below each)."""
    locs = [((*loc, part), key) for loc, part, *_ in _positions(tree) if part != "node" for key in (False, True)]
    locs += [((*loc, "no such key"), False) for loc, _ in locs] + [((*loc, 10_000), True) for loc, _ in locs]
    return [(loc, key, document.position(loc, key=key)) for loc, key in [((), False), *locs]]


def _same_as_ruamel(text: str) -> bool:
    """Whether the fast reader read `text` (True) or declined it (False); when it read, data, types and every
    line and column must be what ruamel gives."""
    fast = _fast_yaml.read(text, MAX_VALUES)
    if fast is None:
        return False
    tree, data = _slow(text)
    assert _typed(fast[1]) == _typed(data)
    assert _placed(Document(Path("f"), None, data=fast[1], nodes=fast[0]), tree) == \
        _placed(Document(Path("f"), tree), tree)
    return True


needs_libyaml = pytest.mark.skipif(not _fast_yaml.available(), reason="PyYAML without libyaml: ruamel reads all")


@needs_libyaml
@pytest.mark.parametrize("text", [*YAML_TEXTS, *TRICKY])
def test_the_fast_reader_reads_plain_yaml_as_ruamel_does(text: str) -> None:
    assert _same_as_ruamel(text)


@needs_libyaml
@pytest.mark.parametrize("path", REPO_YAML, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_of_the_repository_reads_the_same(path: Path) -> None:
    _same_as_ruamel(path.read_text(encoding="utf-8"))  # declined or identical


def test_most_of_the_repositorys_yaml_takes_the_fast_reader() -> None:
    if not _fast_yaml.available():
        pytest.skip("PyYAML without libyaml")
    read = [p for p in REPO_YAML if _fast_yaml.read(p.read_text(encoding="utf-8"), MAX_VALUES) is not None]
    assert len(read) >= len(REPO_YAML) * 0.6, [str(p) for p in REPO_YAML if p not in read]


ONE_PATTERN = re.compile(r"(?:^|[\s\[{,])[!&*]|<<|^%|[\t\x85\u2028\u2029]|^ +$", re.MULTILINE)
"""What the fast reader declines, as one regular expression: `_declined` searches its parts only where a
substring each needs is there, and must say the same."""
EDGES = ["a: 1\n   \nb: 2\n", "a: 1\n   ", "a: 1 \n", "a: b!c\n", "a: [x,&y]\n", "a: 50%\n", "%YAML 1.2\n---\na: 1\n",
         "a: x\n%b\n", "a: <b>\n", "a: <<\n", "a:\tb\n", "a: \u2028\n", "a: {b: *c}\n", "!a: 1\n", "a: b *c\n", " \n",
         " ", "", "a: 1\n\n", "a: ' '\n"]


@pytest.mark.parametrize("text", [*DECLINED, *YAML_TEXTS, *TRICKY, *EDGES])
def test_the_declined_check_is_the_one_pattern(text: str) -> None:
    assert _fast_yaml._declined(text) == (ONE_PATTERN.search(text) is not None)


def test_the_declined_check_is_the_one_pattern_on_the_repositorys_yaml() -> None:
    texts = [path.read_text(encoding="utf-8") for path in REPO_YAML]
    assert [_fast_yaml._declined(t) for t in texts] == [ONE_PATTERN.search(t) is not None for t in texts]


@pytest.mark.parametrize("text", DECLINED)
def test_what_the_fast_reader_is_not_sure_of_goes_to_ruamel(tmp_path: Path, text: str) -> None:
    assert _fast_yaml.read(text, MAX_VALUES) is None
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        document = load_yaml(path)
    except ConfigError as exc:  # ruamel's words: a duplicate key, a syntax error, two documents
        assert str(exc).startswith(f"{path}:")
        return
    assert _typed(document.data) == _typed(_slow(text)[1])


def test_the_fast_reader_declines_what_would_pass_the_value_limit() -> None:
    text = "a: [" + ", ".join("1" for _ in range(50)) + "]\n"
    assert _fast_yaml.read(text, 52) is not None and _fast_yaml.read(text, 51) is None


def test_report_links_resolve_from_a_folder_reached_through_a_symlink(tmp_path: Path, tamesu: Any) -> None:
    from tamesu.report.html import render_html
    from tamesu.report.load import load_run

    (tmp_path / "tamesu.yaml").write_text('models:\n  target: { provider: fake, rules: [{ say: "shipped" }] }\n')
    (tmp_path / "s.tamesu.yaml").write_text("targets:\n  bot: { type: model, model: target }\ntests:\n" + "".join(
        f"  - name: t{n}\n    target: bot\n    scenario: {{ script: [{{ say: hi }}] }}\n" for n in range(2)))
    assert tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path).returncode == 0
    [run_dir] = (tmp_path / "out").iterdir()
    (tmp_path / "reports" / "deep").mkdir(parents=True)
    (tmp_path / "via").symlink_to(tmp_path / "reports")
    base = tmp_path / "via" / "deep"
    html = render_html(load_run(run_dir), base)
    links = [unquote(found) for found in re.findall(r'href="([^"#][^"]*)"', html)]
    assert len(links) >= 7  # the run folder, then result.json, transcript.json and the folder of each run
    for link in links:
        assert (base.resolve() / link).exists(), link
        assert link.startswith("../../out/"), link  # from the real folder, not through the symlink


def _sync_thread(directory: RunDirectory) -> Any:
    """This directory's sync thread, if one runs (other tests' directories have their own)."""
    return directory._syncer._thread


class _Line(BaseModel):
    n: int


def test_results_lines_are_synced_by_a_thread_that_ends_with_the_run(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, Redactor())
    for n in range(20):
        directory.append_result(_Line(n=n))
    thread = _sync_thread(directory)
    directory.close()  # waits for the last sync; the thread is gone after it
    assert thread is None or not thread.is_alive()
    assert _sync_thread(directory) is None
    assert [json.loads(line)["n"] for line in (tmp_path / "results.jsonl").read_text().splitlines()] == list(range(20))


def test_an_idle_sync_thread_ends_and_a_later_line_starts_another(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tamesu.engine import artifacts

    monkeypatch.setattr(artifacts._Syncer, "IDLE_S", 0.05)
    directory = RunDirectory(tmp_path, Redactor())
    directory.append_result(_Line(n=1))
    first = _sync_thread(directory)  # None when it has already synced and ended (a slow machine)
    if first is not None:
        first.join(timeout=30)  # it ends by itself once idle
        assert not first.is_alive()
    assert _sync_thread(directory) is None
    directory.append_result(_Line(n=2))  # starts another
    second = _sync_thread(directory)
    directory.close()
    assert second is None or (second is not first and not second.is_alive())
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 2 and _sync_thread(directory) is None


def test_a_failed_sync_stops_the_next_line_and_the_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import os

    def broken(fd: int) -> None:  # an I/O error of the disk, which cannot be made to happen here
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    directory = RunDirectory(tmp_path, Redactor())
    directory.append_result(_Line(n=1))
    with pytest.raises(OSError, match="Input/output error"):
        directory.close()
    with pytest.raises(OSError, match="Input/output error"):
        directory.append_result(_Line(n=2))
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1


def test_a_run_process_freezes_its_heap_and_collects_the_young_less_often() -> None:
    import subprocess
    import sys

    # in a process of its own: the collector's settings are the whole process's
    script = ("import gc\nfrom tamesu.engine.heap import settle_for_a_run, YOUNG_THRESHOLD\n"
              "before = gc.get_freeze_count()\nsettle_for_a_run()\nprint(before, gc.get_freeze_count() > before,"
              " gc.get_threshold()[0] == YOUNG_THRESHOLD)\ngc.set_threshold(50_000)\nsettle_for_a_run()\n"
              "print(gc.get_threshold()[0])\nsettle_for_a_run(1000)\nprint(gc.get_threshold()[0])\n"
              "settle_for_a_run(100_000)\nprint(gc.get_threshold()[0])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # a larger setting of the user's is kept; 1000 runs at once collect every 100,000 allocations, never
    # less often than every 200,000
    assert done.stdout.split() == ["0", "True", "True", "50000", "100000", "200000"]


@needs_libyaml
def test_mutated_suites_read_by_the_fast_reader_read_the_same_with_ruamel() -> None:
    """A seeded fuzzer: the repository's YAML files with characters inserted, deleted and copied. Whatever the fast
    reader takes, ruamel must take too, with the same data and positions (`TAMESU_FUZZ=N` for more)."""
    import os
    import random

    rng = random.Random(20)
    texts = [p.read_text(encoding="utf-8") for p in REPO_YAML]
    pieces = [*" :-'\"\n#[]{},|>?x1.0~e\t&*!%\\", "  ", "\n  ", ": ", "- ", "\n- ", "0x1", "1e3", "null", "true",
              "yes", " #", ">-", "|2", "\n\n", "\u00e9", "\\n"]
    taken = 0
    for _ in range(int(os.environ.get("TAMESU_FUZZ", "400"))):
        text = rng.choice(texts)
        for _ in range(rng.randint(1, 4)):
            at, roll = rng.randrange(len(text) + 1), rng.random()
            if roll < 0.4:
                text = text[:at] + rng.choice(pieces) + text[at:]
            elif roll < 0.8:
                text = text[:at] + text[at + rng.randint(1, 3):]
            else:
                start = rng.randrange(len(text) + 1)
                text = text[:at] + text[start:start + 5] + text[at:]
        try:
            taken += _same_as_ruamel(text)
        except AssertionError:
            raise
        except Exception as exc:  # ruamel refused what the fast reader took
            raise AssertionError(f"ruamel refuses what the fast reader read: {exc}\n{text}") from None
    assert taken > 100  # the mutants the fast reader took were compared


PATH_DOCUMENTS = [
    {"text": "hi", "reply": {"text": "nested", "n": 0}, "done": False, "tool_calls": [{"name": "a"}],
     "none": None, "empty": {}, "list": [1, 2], "_under": 1, "a1": {"b_2": [{"c": 1}]}},
    [{"text": "in a list"}, {"reply": {"text": "x"}}],
    {"reply": "a string, not an object", "text": ["a", "list"]},
    {"reply": [{"text": "list under reply"}]},
    {}, [],
]
NAME_PATHS = ["$.text", "$.reply.text", "$.reply.n", "$.done", "$.tool_calls", "$.none", "$.empty", "$.list",
              "$.missing", "$.reply.missing.deeper", "$._under", "$.a1.b_2", "$.text.length"]


@pytest.mark.parametrize("doc", PATH_DOCUMENTS)
def test_paths_of_names_find_what_python_jsonpath_finds(doc: Any) -> None:
    import jsonpath

    from tamesu.targets.rest.read import _dotted_keys, values

    for path in NAME_PATHS:
        assert _dotted_keys(path) is not None, path  # each takes the lookup path
        assert values(path, doc) == jsonpath.findall(path, doc), path
    # other paths are left to python-jsonpath
    assert _dotted_keys("$.reply[0].text") is None and _dotted_keys("$..text") is None
    assert _dotted_keys("$['text']") is None and _dotted_keys("$.*") is None


@pytest.mark.parametrize("base", ["parent", "itself", "elsewhere"])
def test_report_links_joined_as_text_are_the_resolved_relative_paths(tmp_path: Path, base: str) -> None:
    from tamesu.report.html import _Page
    from tamesu.report.load import LoadedRun
    from tamesu.results.records import RunSummaryFile

    run_dir = tmp_path / "out" / "20261201-120000-000-abcd"
    (run_dir / "suite" / "a test" / "run-1").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    folder = {"parent": run_dir.parent, "itself": run_dir, "elsewhere": tmp_path / "elsewhere"}[base]
    page = _Page(LoadedRun(dir=run_dir, summary=RunSummaryFile.model_construct(), results=[]), folder, None)
    for path in [run_dir / "suite" / "a test" / "run-1" / "transcript.json", run_dir / "report.html",
                 run_dir / "suite" / ".." / "elsewhere.txt", run_dir, tmp_path / "elsewhere" / "x.txt"]:
        assert page.relative(path) == Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix(), path


LINES = ["PASS  suite/a test  2.13s", "      ✗ contains (turn 2): no 'echo' in «réponse» 日本語 " + "x" * 200,
         "ERR   suite/b  0.00s", "  trailing spaces   ", "", "[bold]not markup[/bold] :smile: http://x/y",
         "tab\tinside", "two\nlines", "\x1b[31mescape\x1b[0m"]


@pytest.mark.parametrize("color", ["never", "auto"])
def test_console_lines_written_plain_are_what_rich_writes(color: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.text import Text

    from tamesu.report.console import ConsoleReporter, make_console

    def written(plain: bool) -> str:
        console = make_console(color)
        console.file = io.StringIO()
        reporter = ConsoleReporter(console, Redactor())
        assert reporter._writes_plain()  # a file, no colour: the plain path
        if not plain:
            monkeypatch.setattr(reporter, "_writes_plain", lambda: False)
        for line in LINES:
            reporter._print(Text.assemble(("PASS", "bold green"), " ", line, style="dim"))
        return console.file.getvalue()

    assert written(plain=True) == written(plain=False)
    assert "x" * 200 in written(plain=True)  # never cut at the console's width


def test_write_json_makes_a_removed_folder_again_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    directory = RunDirectory(tmp_path, Redactor())
    run = tmp_path / "suite" / "test" / "run-1"
    directory.write_json(run / "result.json", {"status": "passed"})
    for found in run.iterdir():
        found.unlink()
    run.rmdir()
    (tmp_path / "suite" / "test").rmdir()  # a folder the run made, removed while it runs
    directory.write_json(run / "result.json", {"status": "failed"})
    assert json.loads((run / "result.json").read_text()) == {"status": "failed"}
    with pytest.raises(ValueError):
        directory.write_json(run / "transcript.json", {"said": json.loads('"\\ud800"')})
    assert sorted(p.name for p in run.iterdir()) == ["result.json"]


def test_results_lines_are_synced_at_most_every_interval_and_the_last_one_at_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from tamesu.engine import artifacts

    real_fsync = os.fsync
    synced: list[tuple[float, int]] = []  # when each sync ran, and how long the file was then

    def recording(fd: int) -> None:
        synced.append((time.monotonic(), os.fstat(fd).st_size))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    directory = RunDirectory(tmp_path, Redactor())
    for n in range(40):  # tests finishing every 10 ms, for 0.4 s or more
        directory.append_result(_Line(n=n))
        time.sleep(0.01)
    directory.close()
    gaps = [later[0] - earlier[0] for earlier, later in itertools.pairwise(synced)]
    assert synced and len(synced) < 40
    # the last sync may follow sooner: closing syncs at once
    assert all(gap >= artifacts._Syncer.MIN_INTERVAL_S - 0.01 for gap in gaps[:-1]), gaps
    assert synced[-1][1] == (tmp_path / "results.jsonl").stat().st_size  # the last sync holds every line


def _suite_of(folder: Path, tests: int, *, template: bool = False) -> Path:
    suite = folder / "suite.yaml"
    say = "'{{ vars.word }}'" if template else "'hello'"
    suite.write_text("vars: { word: hello }\ntargets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\ntests:\n"
                     + "".join(f"  - name: t{n}\n    target: bot\n    scenario: {{ script: [ {{ say: {say} }} ] }}\n"
                               for n in range(tests)), encoding="utf-8")
    return suite


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_a_plan_runs_no_collection_and_leaves_the_collector_as_it_was(tmp_path: Path, enabled: bool) -> None:
    import gc

    from tamesu.plan import load_plan

    suite = _suite_of(tmp_path, 300)
    collections: list[str] = []

    def count(phase: str, _info: dict[str, Any]) -> None:
        # a collection runs in the frame that allocated: one inside the load has _load_suite below it
        frame = sys._getframe(1)
        while phase == "start" and frame is not None:
            if frame.f_code.co_name == "_load_suite":
                collections.append(frame.f_code.co_filename)
                break
            frame = frame.f_back

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    gc.callbacks.append(count)
    try:
        plan = load_plan([suite], require_secrets=False)
        assert gc.isenabled() is enabled
    finally:
        gc.callbacks.remove(count)
        (gc.enable if was else gc.disable)()
    assert len(plan.tests) == 300
    assert collections == []  # with the collector on, 300 tests' objects would have started several


def test_a_plan_with_no_template_is_its_spec_and_one_with_templates_is_rendered(tmp_path: Path) -> None:
    from tamesu.plan import load_plan

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = load_plan([_suite_of(tmp_path / "a", 2)], require_secrets=False)
    rendered = load_plan([_suite_of(tmp_path / "b", 2, template=True)], require_secrets=False)
    for plan in (plain, rendered):
        test = plan.tests[0]
        assert test.vars == {"word": "hello"} and test.spec.vars == {"word": "hello"}
        assert [s.model_dump(exclude_unset=True) for s in test.spec.scenario.script] == [{"say": "hello"}]
    # the shortcut keeps what the suite set and nothing more, as validating the dumped spec again did
    assert plain.tests[0].spec.model_fields_set == rendered.tests[0].spec.model_fields_set
