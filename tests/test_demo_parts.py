"""`make demo`'s voice and browser parts (issue 32, item 3) on a machine without what they need: each says in
one line what to install and lets the demo go on, and the demo's last words name the reports it just wrote.
(The parts themselves are the example suites that test_realtime_target.py and test_browser_target.py run.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_without_chromium_the_browser_part_is_one_line_saying_what_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # no chromium on it
    env.pop("TAMESU_CHROMIUM", None)
    done = _script("demo_web.py", "--persona", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["demo: the browser part is skipped: it needs Chromium and the browser "
                                        "extra: apt-get install chromium fonts-liberation"]


def test_the_demo_ends_with_the_reports_it_wrote_and_how_to_open_the_history(tmp_path: Path) -> None:
    done = _script("demo_end.py", "0", env=dict(os.environ))  # nothing newer than now: no report named
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "demo: the HTML reports (open them in a browser):"
    assert lines[-1].strip().startswith(".venv/bin/tamesu view ")
    assert not any("report.html" in line for line in lines)


def _demo_recipe_examples() -> dict[str, str]:
    """The example folder each script of the Makefile's `demo` target runs, by script."""
    recipe = re.search(r"^demo: \$\(BIN\)/\.installed\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None, "no demo target in the Makefile"
    found = {}
    for script in re.findall(r"scripts/(demo\w*\.py)", recipe.group(1)):
        source = (ROOT / "scripts" / script).read_text()
        named = re.search(r'"examples" / "([\w-]+)"', source) or re.search(r"examples/([\w-]+)", source.split("\n")[0])
        if named:  # demo_end.py runs none: it names the reports the others wrote
            found[script] = named.group(1)
    return found


def test_the_readme_says_every_example_make_demo_runs() -> None:
    # before: scripts/demo_traced.py (examples/traced-agent) ran in `make demo`, and the README did not say so
    examples = _demo_recipe_examples()
    assert "demo_traced.py" in examples and len(examples) >= 6, examples
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        said = re.search(r"^make demo .*?(?=^make test)", page.read_text(), re.M | re.S)
        assert said is not None, page
        assert {script: name for script, name in examples.items() if f"examples/{name}" not in said.group(0)} == {}, \
            page
