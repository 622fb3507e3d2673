"""A report named twice for one destination is refused where it is written (exit 2).

Before: `--report html,html` wrote report.html twice, `github,github` printed every annotation twice, and
`json:r.out,junit:r.out` kept only the JUnit file, nothing said."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

_SUITE = """
targets:
  bot: { type: model, model: bot }
models:
  bot: { provider: fake, rules: [ { when: "hi", say: "hello" } ] }
tests:
  - { name: greets, scenario: { script: [ { say: hi } ] }, assert: [ { contains: hello } ] }
"""


def test_one_destination_named_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    said = {
        "html,html": "--report: html and html: both write report.html in the run folder; name each report once",
        "github,junit,github": "--report: github and github: named twice; name each report once",
        "json:r.out,junit:./r.out": "--report: json:r.out and junit:./r.out: both write ./r.out; name each report "
                                    "once",
    }
    for reports, line in said.items():
        done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", reports], cwd=tmp_path)
        assert (done.returncode, done.stderr.strip()) == (2, line), done.stdout + done.stderr
        assert not (tmp_path / "out").exists() and not (tmp_path / "r.out").exists()
    (tmp_path / "tamesu.yaml").write_text("suites: ['*.tamesu.yaml']\nreport: [html, junit, html]\n")
    checked = run_tamesu(["validate"], cwd=tmp_path)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "tamesu.yaml:2:9: report: html and html: both write report.html in the run folder; name each report " \
           "once" in checked.stdout + checked.stderr


def test_the_same_format_to_two_files_is_two_reports(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out", "--report", "html,html:copy.html"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = next((tmp_path / "out").iterdir())
    assert (run_dir / "report.html").is_file() and (tmp_path / "copy.html").is_file()
