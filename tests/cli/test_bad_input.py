"""Bad input is bounded: every suite and JSONL file, however broken, is loaded or refused with `file:line:col`
problems, quickly, in bounded memory, never a traceback and never by running anything.

The classes of the issue are tried one by one; then a fuzzer mutates the example suites and JSONL files on a
fixed seed (`TAMESU_FUZZ=N` for N mutations of each file, default 12; `TAMESU_FUZZ_SEED` to change the seed).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tamesu.errors import MESSAGE_CHARS, PATH_CHARS, ConfigError
from tamesu.jsonl.parser import ParseSettings, parse_file
from tamesu.plan import load_plan
from tamesu.plan.targets import Resolver
from tamesu.suite.yaml_reader import _DIGITS, _SAMPLE_STEP, MAX_DIGITS, _may_hold_a_long_number

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 2.0
MEGABYTES = 300
FUZZ = int(os.environ.get("TAMESU_FUZZ", "12"))
SEED = int(os.environ.get("TAMESU_FUZZ_SEED", "13"))
RESOLVER = Resolver(models={"judge", "simulator", "validator"}, targets={"expense"})

_TARGET = "targets:\n  x: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
_TEST = "tests:\n  - name: t\n    target: x\n    scenario: { script: [{ say: hi }] }\n"
_ALIASES = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True))

# each made when its test runs: made at import, every xdist worker built them all as it collected this module
# (0.25 s of CPU and some 40 MB each)
SUITE_CLASSES: dict[str, Callable[[], str | bytes]] = {
    "yaml alias bomb": lambda: _ALIASES + "tests: []\n",
    "nesting 10,000 deep": lambda: "tests: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "block nesting 3,000 deep": lambda: "tests:\n" + "".join(" " * (2 * i) + "- \n" for i in range(3000)),
    "an integer of 5,000 digits": lambda: _TARGET + _TEST + "    repeat: " + "9" * 5000 + "\n",
    "a timeout beyond its range": lambda: _TARGET + _TEST + "    timeout: 99999999999999999999999\n",
    "a timeout of inf": lambda: _TARGET + _TEST + "    timeout: .inf\n",
    "20,000 inline cases": lambda: _TARGET + _TEST + "    cases:\n" + "".join(
        f"      - {{ name: c{i}, vars: {{ a: {i} }} }}\n" for i in range(20_000)),
    "20,000 inline cases in flow style": lambda: _TARGET + _TEST + "    cases: [" + ", ".join(
        f"{{ name: c{i}, vars: {{ a: {i} }} }}" for i in range(20_000)) + "]\n",
    "a flow list of 100,000 items": lambda: _TARGET + _TEST + "    tags: [" + ", ".join(
        f"t{i}" for i in range(100_000)) + "]\n",
    "300,000 flow collections": lambda: _TARGET + _TEST + "    tags: " + "[]" * 300_000 + "\n",
    "2,500 inline cases": lambda: _TARGET + _TEST + "    cases:\n" + "".join(
        f"      - {{ name: c{i} }}\n" for i in range(2_500)),
    "binary": lambda: bytes(random.Random(1).randrange(256) for _ in range(4000)),
    "a NUL byte": lambda: _TARGET + "tests:\n  - name: t\x00x\n",
    "a target type that is a list": lambda: "targets:\n  x: { type: [rest] }\ntests: []\n",
    "a target type that is a mapping": lambda: "targets:\n  x: { type: { a: 1 } }\ntests: []\n",
    "until: 2026-02-30": lambda: _TARGET + _TEST + "    quarantine: { reason: r, until: 2026-02-30 }\n",
    "!!float 0,8": lambda: _TARGET + _TEST + "    pass_threshold: !!float 0,8\n",
    "a number too big for its field": lambda: _TARGET + _TEST + "    repeat: 100000000000\n",
    "<<: *anchor at the top level": lambda: "base: &b { x: 1 }\n<<: *b\ntests: []\n",
    "a merge of a list": lambda: "base: &b [1]\ntests:\n  - <<: *b\n",
    "a recursive alias": lambda: "a: &a [*a]\ntests: []\n",
    "a %TAG directive": lambda: "%TAG !e! tag:example.com,2000:\n---\ntests: !e!x []\n",
    "an unknown tag": lambda: "tests: !python/object:os.system []\n",
    "a byte-order mark": lambda: "\ufeff" + _TARGET + _TEST,
    "an absolute glob in suites": lambda: "",  # the project file below
    "a huge value quoted in a problem": lambda: _TARGET + "tests:\n  - name: t\n    target: " + "y" * 100_000 + "\n",
    "an empty file": lambda: "",
    "a mapping of 100,000 keys": lambda: _TARGET + _TEST + "    vars:\n" + "".join(
        f"      k{i}: 1\n" for i in range(100_000)),
    "a flow mapping of 100,000 keys": lambda: _TARGET + _TEST + "    vars: {" + ", ".join(
        f'"k{i}":1' for i in range(100_000)) + "}\n",
    "a 10 MB key": lambda: _TARGET + _TEST + "    vars:\n      " + "k" * 10_000_000 + ": 1\n",
    "a 10 MB quoted key": lambda: _TARGET + _TEST + "    vars: { \"" + "k" * 10_000_000 + "\": 1 }\n",
    "a 10 MB key after an anchor": lambda: _TARGET + _TEST + "    vars: &v\n      " + "k" * 10_000_000 + ": 1\n",
}


def _measured(action: Callable[[], Any], memory: bool = True) -> tuple[str, float, float]:
    """Run `action`: its outcome (ok, or the problems' first line), the CPU seconds and the peak MB it took.
    CPU time, not wall time: under `pytest -n 2` on a shared machine the wall clock measures the neighbours
    (a parse that blocks never returns, and pytest's timeout fails it). `memory=False` where the peak is not
    asserted: tracing every allocation doubled the loads' CPU time (the peak is then 0)."""
    if memory:
        tracemalloc.start()
    started = time.process_time()
    try:
        action()
        outcome = "ok"
    except ConfigError as exc:
        assert exc.problems, "a ConfigError names at least one problem"
        for problem in exc.problems:
            assert problem.line >= 1 and problem.column >= 1, problem
            # its place, then the path and the message each cut to their bounds (a key or value of 100 kB quoted)
            bound = len(f"{problem.file}:{problem.line}:{problem.column}: ") + PATH_CHARS + 2 + MESSAGE_CHARS
            assert len(str(problem)) <= bound, f"a problem quotes too much: {str(problem)[:200]}..."
        outcome = str(exc.problems[0])
    finally:
        seconds = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1] / 1e6 if memory else 0.0
        if memory:
            tracemalloc.stop()
    return outcome, seconds, peak


@pytest.mark.parametrize("name", list(SUITE_CLASSES))
def test_every_class_of_bad_suite_is_one_answer_quickly(name: str, tmp_path: Path) -> None:
    content = SUITE_CLASSES[name]()
    suite = tmp_path / "suite.yaml"
    suite.write_bytes(content if isinstance(content, bytes) else content.encode())
    if name == "an absolute glob in suites":
        (tmp_path / "tamesu.yaml").write_text('suites: ["/**/*.yaml"]\n')
        suite.write_text(_TARGET + _TEST)
        outcome, seconds, peak = _measured(lambda: load_plan([], tmp_path / "tamesu.yaml"))
    else:
        outcome, seconds, peak = _measured(lambda: load_plan([suite]))
    assert seconds < SECONDS * 4, f"{name}: {seconds:.1f}s"  # 2 s on a quiet machine; CI shares its cores
    assert peak < MEGABYTES, f"{name}: {peak:.0f} MB"
    if name in ("a byte-order mark",):
        assert outcome == "ok"
    elif name == "an empty file":
        assert outcome == "ok"  # a warning, checked below
    elif name != "2,500 inline cases" or outcome != "ok":
        assert outcome != "ok", f"{name} was accepted"


def test_a_mapping_past_its_limit_is_refused_at_the_key_past_it(tmp_path: Path) -> None:
    text = _TARGET + _TEST + "    vars:\n" + "".join(f"      k{i}: 1\n" for i in range(60_000))
    (tmp_path / "suite.yaml").write_text(text)
    outcome, _, _ = _measured(lambda: load_plan([tmp_path / "suite.yaml"]), memory=False)
    # the file's own 11 keys come first (targets, x, type, url, tests, name, target, scenario, script, say,
    # vars): key 50,001 is k49989
    at = text.index(": 1", text.index("k49989:"))
    line = text.count("\n", 0, at) + 1
    assert outcome == (f"{tmp_path / 'suite.yaml'}:{line}:13: more than 50,000 mapping keys in one file (key 50,001 "
                       "ends here): put many cases in a cases_file (CSV or JSON), which reads far faster")


def test_a_key_longer_than_yaml_allows_is_one_line_at_its_end(tmp_path: Path) -> None:
    text = _TARGET + _TEST + "    vars:\n      " + "k" * 3_000_000 + ": 1\n"
    (tmp_path / "suite.yaml").write_text(text)
    outcome, _, _ = _measured(lambda: load_plan([tmp_path / "suite.yaml"]), memory=False)
    line = text.count("\n")
    assert outcome == (f"{tmp_path / 'suite.yaml'}:{line}:3000007: YAML syntax error: mapping values are not allowed "
                       "in this context (a key is at most 1,024 characters)")


@pytest.mark.parametrize("style", ["block", "flow"])
def test_a_list_past_its_limit_is_refused_where_it_grows_too_long(style: str, tmp_path: Path) -> None:
    items = [f"c{i}" for i in range(52_000)]  # plain items: 52,000 `{...}` would pass the flow collections' cap first
    if style == "block":
        text = _TARGET + _TEST + "    cases:\n" + "".join(f"      - {item}\n" for item in items)
    else:
        text = _TARGET + _TEST + "    cases: [" + ", ".join(items) + "]\n"
    (tmp_path / "suite.yaml").write_text(text)
    outcome, _, _ = _measured(lambda: load_plan([tmp_path / "suite.yaml"]), memory=False)
    # the file's 50,001st list item: in block style the tests list's own item comes first, so it is case
    # c49999 (at its dash); in flow style an item is counted at the comma before it, so it is case c50000
    at = text.index("- c49999\n") if style == "block" else text.index(", c50000,")
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert outcome == (f"{tmp_path / 'suite.yaml'}:{line}:{column}: more than 50,000 list items in one file "
                       "(item 50,001 is here): put many cases in a cases_file (CSV or JSON), which reads far faster")


def test_thousands_of_problems_are_told_in_a_screenful(tmp_path: Path, tamesu: Any) -> None:
    cases = "".join(f"      - {{ name: c{i}, colour: red }}\n" for i in range(1_500))  # one unknown key each
    (tmp_path / "suite.yaml").write_text(_TARGET + _TEST + "    cases:\n" + cases)
    done = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 202 and all(": tests[0].cases[" in line for line in lines[:200])
    assert lines[0].startswith("suite.yaml:8:") and "cases[0].colour" in lines[0]  # the first ones, in order
    assert lines[-2:] == ["... and 1,300 more, not shown: fix these first", "1,500 problems found"]


@pytest.mark.parametrize("digits", [MAX_DIGITS, MAX_DIGITS + 1, MAX_DIGITS + 2, 2 * MAX_DIGITS])
def test_a_number_too_long_is_found_wherever_it_starts(digits: int) -> None:
    # the prescan looks for long numbers only where one character in _SAMPLE_STEP suggests one: at every
    # offset from that step, it finds what the one regular expression finds, and only that
    for digit, offset in itertools.product("7٣", range(_SAMPLE_STEP + 1)):  # an Arabic-Indic digit is \d too
        text = "a: " + "x" * offset + " " + digit * digits + "\n"
        found = _DIGITS.search(text) if _may_hold_a_long_number(text) else None
        assert (found is not None) == (digits > MAX_DIGITS) == (_DIGITS.search(text) is not None), (digit, offset)
        assert found is None or found.start() == 4 + offset


def test_an_empty_suite_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    plan = load_plan([tmp_path / "empty.yaml"])
    assert [p.message for p in plan.warnings] == ["an empty suite: no tests"]


def test_fifos_devices_folders_and_symlink_loops_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "loop1.yaml").symlink_to(tmp_path / "loop2.yaml")
    (tmp_path / "loop2.yaml").symlink_to(tmp_path / "loop1.yaml")
    (tmp_path / "folder.yaml").mkdir()
    for path, words in [(tmp_path / "fifo.yaml", "it is a FIFO"), (Path("/dev/zero"), "it is a device"),
                        (tmp_path / "loop1.yaml", "a symlink loop"), (tmp_path / "folder.yaml", "no suite files")]:
        outcome, seconds, _ = _measured(lambda path=path: load_plan([path]))
        assert words in outcome and seconds < SECONDS * 4, (path, outcome)


def test_a_cases_file_that_is_a_fifo_or_garbage_is_one_problem(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "cases.csv")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    for cases_file, words in [("cases.csv", "it is a FIFO"), ("deep.json", "nested too deeply")]:
        suite = tmp_path / "suite.yaml"
        suite.write_text(_TARGET + _TEST + f"    cases_file: {cases_file}\n")
        outcome, seconds, _ = _measured(lambda suite=suite: load_plan([suite]))
        assert words in outcome and seconds < SECONDS * 4, outcome


def test_a_dotenv_that_is_not_text_is_one_problem(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text("")
    (tmp_path / "suite.yaml").write_text(_TARGET + _TEST)
    (tmp_path / ".env").write_bytes(b"A=1\n\xff\xfe=2\n")
    outcome, _, _ = _measured(lambda: load_plan([tmp_path / "suite.yaml"], tmp_path / "tamesu.yaml"))
    assert outcome.endswith(".env:2:1: not UTF-8 text (a binary file?): byte 0xff")
    (tmp_path / ".env").write_bytes(b"=\nexport\n  \x01=3\nB='unterminated\n" * 100)
    assert _measured(lambda: load_plan([tmp_path / "suite.yaml"], tmp_path / "tamesu.yaml"))[0] == "ok"


JSONL_CLASSES: dict[str, Callable[[], str | bytes]] = {
    "a byte-order mark": lambda: '\ufeff{"id": "a", "input": "hi"}\n',
    "a NUL byte": lambda: '{"id": "a", "input": "hi\x00"}\n',
    "nesting 10,000 deep": lambda: '{"id": "a", "input": ' + "[" * 10_000 + "]" * 10_000 + "}\n",
    "binary": lambda: bytes(random.Random(2).randrange(256) for _ in range(4000)),
    "an integer of 5,000 digits": lambda: '{"id": "a", "input": "hi", "max_turns": ' + "9" * 5000 + "}\n",
    # 20,000 take about 0.8 s of CPU on a quiet machine (docs/reliability.md); CI shares its cores
    "5,000 cases": lambda: "".join(f'{{"id": "c{i}", "input": "hi"}}\n' for i in range(5_000)),
}


def _parse_jsonl(path: Path) -> None:
    parse_file(path, path.name, ParseSettings(RESOLVER, None))


@pytest.mark.parametrize("name", list(JSONL_CLASSES))
def test_every_class_of_bad_jsonl_is_one_answer_quickly(name: str, tmp_path: Path) -> None:
    content = JSONL_CLASSES[name]()
    path = tmp_path / "cases.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    outcome, seconds, peak = _measured(lambda: _parse_jsonl(path))
    assert seconds < SECONDS * 4 and peak < MEGABYTES, (name, seconds, peak)
    if name in ("a byte-order mark", "5,000 cases"):
        assert outcome == "ok", outcome
    else:
        assert outcome != "ok", f"{name} was accepted"


@pytest.mark.parametrize(("content", "at", "note"), [
    ('{"id": "a", "input": "hi"\n{"id": "b", "input": "ok"}\n', "1:26", "the line ends before the value does"),
    ('{"id": "a", "input": "hi"\n', "1:26", "the file ends before the value does"),
    ('{"id": "a",\n "input": x}\n', "2:11", ""),  # an object over two lines fails where it really breaks
    # a line that is no JSON at all, after a good one: before, reported at the end of the good line above it
    ('{"id": "a", "input": "hi"}\nnot json at all\n', "2:1", ""),
])
def test_an_unfinished_json_object_is_reported_on_its_own_line(content: str, at: str, note: str, tamesu: Any,
                                                               tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text(content)
    done = tamesu(["validate", "cases.jsonl"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    first, *rest = done.stderr.splitlines()
    assert first.startswith(f"cases.jsonl:{at}: not valid JSON: "), first
    assert (f"({note})" in first) if note else "(" not in first, first
    assert rest == ["1 problem found"], done.stderr


@pytest.mark.parametrize(("suites", "said"), [
    ("suites: []\n", "tamesu.yaml:1:9: suites: the list is empty: name suite files or globs here "
                      '(suites: ["suites/*.yaml"]), or give paths'),
    ('suites: ["nothing/*.yaml"]\n', "tamesu.yaml:1:9: suites: no suite files match nothing/*.yaml"),
    ("out: runs\nsuites:\n", "tamesu.yaml:2:1: suites: the list is empty: name suite files or globs here "
                             '(suites: ["suites/*.yaml"]), or give paths'),
    # it was "tamesu.yaml:1:1: suites: '': Unacceptable pattern: ''"
    ('suites: ["suites/*.yaml", ""]\n', "tamesu.yaml:1:27: suites[1]: an empty pattern names no file: write a glob "
                                        "such as suites/*.yaml"),
])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_project_whose_suites_name_nothing_says_so_where_it_does(suites: str, said: str, command: str,
                                                                   tamesu: Any, tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text(suites)
    done = tamesu([command], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [said, "1 problem found"]


@pytest.mark.parametrize("command", ["validate", "run", "list"])
def test_a_folder_with_no_project_points_at_init(command: str, tamesu: Any, tmp_path: Path) -> None:
    """A new user's first `tamesu run` in an empty folder. Before, only the default globs were named ("(the default
    suites of a project; tamesu.yaml can name others)"), not the command that makes a project."""
    folder = tmp_path / "new"
    folder.mkdir()
    done = tamesu([command], cwd=folder)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        ".:1:1: no suite files match suites/*.yaml, **/*.tamesu.yaml, and there is no tamesu.yaml here or above: "
        "`tamesu init` writes one with a first suite, or give the suite files to use", "1 problem found"]


def test_a_message_longer_than_a_file_name_is_a_message(tamesu: Any, tmp_path: Path) -> None:
    done = tamesu(["test", "-i", "hello " * 100, "-n", "http://127.0.0.1:9/chat", "--dry-run"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "[message]: standard, 1 message(s)" in done.stdout


def test_scripts_refer_only_to_the_projects_own_modules(tamesu: Any, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = tamesu(["test", "-i", f"scripts:os:system?command=touch {marker}", "-n", "http://127.0.0.1:9/chat",
                   "--dry-run"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'os' is a standard-library or installed module, and scripts: runs only the project's own" in done.stderr
    assert not marker.exists()


# ---------------------------------------------------------------- the fuzzer

_TOKENS = ["&a ", "*a", "<<: *a\n", "!!float ", "!!binary ", "[", "]", "{", "}", "\x00", "9" * 400, "%TAG ! x\n",
           "\t", ": ", "- ", "'", '"', "{{vars.", "}}", "\ufeff", "\\u0000", "---\n", "...\n", "? ", "|\n", ">-\n",
           "#", "\n" + " " * 300, "2026-02-30", "null", "1e999", "-", ",", "\u2028"]


def _mutate(text: str, chance: random.Random) -> str:
    for _ in range(chance.randint(1, 6)):
        kind = chance.randrange(6)
        at = chance.randrange(len(text) + 1)
        if kind == 0:
            text = text[:at] + chance.choice(_TOKENS) + text[at:]
        elif kind == 1:
            text = text[:at] + text[at + chance.randint(1, 40):]
        elif kind == 2:
            lines = text.splitlines(keepends=True)
            if lines:
                line = chance.choice(lines)
                text = text.replace(line, line * chance.randint(2, 30), 1)
        elif kind == 3:
            text = text[:at]
        elif kind == 4 and text:
            text = text[:at] + chr(chance.randrange(1, 0x2FFF)) + text[at + 1:]
        else:
            text = text[:at] + chance.choice(_TOKENS) * chance.randint(2, 200) + text[at:]
    return text


_SUITES = sorted(ROOT.glob("examples/*/*.tamesu.yaml"))
_JSONL = sorted(ROOT.glob("examples/*/tests/*.jsonl"))


@pytest.mark.parametrize("original", _SUITES, ids=lambda p: p.parent.name + "/" + p.name)
def test_fuzzed_suites_are_loaded_or_refused(original: Path, tmp_path: Path) -> None:
    folder = tmp_path / original.parent.name
    shutil.copytree(original.parent, folder, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    text = original.read_text(encoding="utf-8")
    chance = random.Random(f"{SEED}:{original.name}")
    slowest = 0.0
    for _ in range(FUZZ):
        (folder / original.name).write_text(_mutate(text, chance), encoding="utf-8", errors="surrogatepass")
        _, seconds, _ = _measured(lambda: load_plan([folder / original.name], folder / "tamesu.yaml"), memory=False)
        slowest = max(slowest, seconds)
    assert slowest < SECONDS * 4, f"slowest mutation took {slowest:.1f}s"


@pytest.mark.parametrize("original", _JSONL, ids=lambda p: p.name)
def test_fuzzed_jsonl_is_parsed_or_refused(original: Path, tmp_path: Path) -> None:
    text = original.read_text(encoding="utf-8")
    chance = random.Random(f"{SEED}:{original.name}")
    path = tmp_path / original.name
    for _ in range(FUZZ * 2):
        path.write_text(_mutate(text, chance), encoding="utf-8", errors="surrogatepass")
        _, seconds, _ = _measured(lambda: _parse_jsonl(path), memory=False)
        assert seconds < SECONDS * 4


def test_tags_that_name_no_tag_are_refused(tmp_path: Path, tamesu: Any) -> None:
    # before: `--tags ,,` (a CI variable left empty) and `--tags '!'` ran every test, as if no --tags were given
    (tmp_path / "suite.yaml").write_text(
        "targets:\n  bot: { type: rest, url: 'http://127.0.0.1:9/chat' }\n"
        "tests:\n  - { name: t, target: bot, tags: [smoke], scenario: { script: [ { say: hi } ] } }\n")
    for command in ("run", "list"):
        for tags in (",,", "!", ""):
            done = tamesu([command, "suite.yaml", "--tags", tags, "--out", "out"][:6 if command == "run" else 4],
                          cwd=tmp_path)
            assert done.returncode == 2, (command, tags, done.stdout + done.stderr)
            assert done.stderr.strip().splitlines()[-1] == (
                f"--tags: no tag in {tags!r}: give tags separated by commas (!tag excludes one)"), done.stderr
