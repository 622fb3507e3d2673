"""A target no test uses has its templates checked as a used one's are: before, `tamesu validate` said ok about a
`{{vars.nope}}` url, a misspelt `{{session.tokn}}` or an unknown namespace in it, while its schema was checked."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

SUITE = """\
vars: { host: "127.0.0.1" }
remote_agents: { billing: { reply: ok } }
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
  spare:
    type: rest
    url: "{{vars.nope}}"
    headers: { X-Tok: "{{session.tokn}}", X-Ns: "{{sesion.tok}}", X-Run: "{{run.nope}}", X-Later: "{{captured.id}}" }
  opener:
    type: a2a
    url: "http://{{vars.host}}:{{captured.port}}/"
    headers: { X-Agent: "{{remote.biling.url}}", X-Host: "{{vars.host}}" }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }
"""


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("s.tamesu.yaml:")]


def test_an_unused_targets_bad_templates_are_said_where_written(tmp_path: Path) -> None:
    (tmp_path / "s.tamesu.yaml").write_text(SUITE)
    for command in ("validate", "run"):
        done = run_tamesu([command, "s.tamesu.yaml"], cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        lines = _lines(done.stderr)
        assert lines[:4] == [
            "s.tamesu.yaml:7:10: targets.spare.url: bad template {{vars.nope}}: no var 'nope' in the suite or the "
            "project",
            "s.tamesu.yaml:8:23: targets.spare.headers.X-Tok: bad template {{session.tokn}}: the target has no "
            "session.open to capture it",
            "s.tamesu.yaml:8:49: targets.spare.headers.X-Ns: bad template {{sesion.tok}}: unknown namespace "
            "'sesion' (one of args, attachments, captured, env, listen, message, messages, remote, response, run, "
            "secrets, session, trace, ui_messages, vars)",
            "s.tamesu.yaml:8:74: targets.spare.headers.X-Run: bad template {{run.nope}}: a run has run.id and "
            "run.number",
        ], done.stderr
        # `{{captured.id}}` in a header a turn renders names a capture no test has, but no test renders it: nothing
        assert lines[4:] == [
            "s.tamesu.yaml:11:10: targets.opener.url: bad template {{captured.port}}: the target renders its url as "
            "it opens, before the first turn, so nothing is captured yet",
            "s.tamesu.yaml:12:25: targets.opener.headers.X-Agent: bad template {{remote.biling.url}}: no remote agent "
            "'biling' (remote_agents: billing)",
        ], done.stderr
        assert "Traceback" not in done.stderr
        assert "6 problems found" in done.stderr


def test_the_same_templates_in_a_used_target_say_the_same(tmp_path: Path) -> None:
    # the unused target's lines are those it has once a test uses it, but the var's, which names the test
    (tmp_path / "s.tamesu.yaml").write_text(SUITE.replace("target: bot", "target: spare"))
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert _lines(done.stderr)[0] == ("s.tamesu.yaml:7:10: targets.spare.url: bad template {{vars.nope}}: no var "
                                      "'nope' in test 't' (tests[0]), its cases, the suite or the project")
    assert sum(line.startswith("s.tamesu.yaml:8:") for line in done.stderr.splitlines()) == 3, done.stderr


def test_an_unused_targets_unset_variable_is_a_warning_and_a_good_one_is_ok(tmp_path: Path) -> None:
    # no run renders it: an environment variable it names that is not set does not stop a run of the others
    (tmp_path / "s.tamesu.yaml").write_text("""\
vars: { host: "127.0.0.1", token: "{{secrets.TAMESU_UNSET_TOKEN}}" }
targets:
  bot: { type: rest, url: "http://127.0.0.1:9/chat" }
  spare:
    type: rest
    url: "http://{{vars.host}}/{{env.TAMESU_UNSET_XYZ}}"
    headers: { Authorization: "Bearer {{vars.token}}", X-Turn: "{{message}} {{captured.id}}" }
tests:
  - { name: t, target: bot, scenario: { script: [ { say: hi } ] } }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    warned = [line for line in (done.stdout + done.stderr).splitlines() if "targets.spare" in line]
    assert warned == [
        "warning: s.tamesu.yaml:6:10: targets.spare.url: environment variable TAMESU_UNSET_XYZ is not set",
        "warning: s.tamesu.yaml:7:31: targets.spare.headers.Authorization: secret TAMESU_UNSET_TOKEN is not set "
        "(environment or .env) (in {{vars.token}})",
    ], done.stdout + done.stderr


def test_a_counterparts_templates_are_checked_with_its_tests(tmp_path: Path) -> None:
    # a counterpart is opened in the test's run, with the test's vars: its templates were checked by nothing
    (tmp_path / "s.tamesu.yaml").write_text("""\
targets:
  buyer: { type: rest, url: "http://127.0.0.1:9/chat" }
  supplier: { type: rest, url: "http://127.0.0.1:9/{{vars.shop}}/{{vars.nope}}" }
tests:
  - name: t
    target: buyer
    vars: { shop: s1 }
    counterpart: { target: supplier, opening: hi }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert _lines(done.stderr) == [
        "s.tamesu.yaml:3:32: targets.supplier.url: bad template {{vars.nope}}: no var 'nope' in test 't' "
        "(tests[0]), its cases, the suite or the project"], done.stderr
