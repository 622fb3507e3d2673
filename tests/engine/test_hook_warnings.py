"""A failing after_all hook is a warning naming its suite: two suites' failing hooks read as one line twice."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

_SUITE = """
name: {name}
hooks:
  after_all: [ "exit 3" ]
targets:
  bot: {{ type: model, model: bot }}
models:
  bot: {{ provider: fake, rules: [ {{ when: "hi", say: "hello" }} ] }}
tests:
  - {{ name: t, scenario: {{ script: [ {{ say: hi }} ] }}, assert: [ {{ contains: hello }} ] }}
"""


def test_a_failing_after_all_hook_names_its_suite(tmp_path: Path) -> None:
    for name in ("billing", "support"):
        (tmp_path / f"{name}.tamesu.yaml").write_text(_SUITE.format(name=name))
    done = run_tamesu(["run", "billing.tamesu.yaml", "support.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr  # after_all failing is a warning, not a verdict
    said = done.stdout + done.stderr
    assert "suite billing: after_all hook 1" in said and "suite support: after_all hook 1" in said, said


def test_an_http_hook_with_another_status_says_which_it_expected(tmp_path: Path, serve) -> None:
    # before: "POST URL answered 200", with no word of the 201 the hook asked for
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def seed(request: object) -> JSONResponse:
        return JSONResponse({"ok": True})

    url = serve(Starlette(routes=[Route("/seed", seed, methods=["POST"])])).url
    hook = f'before_all: [ {{ http: {{ url: "{url}/seed", method: POST, expect_status: 201 }} }} ]'
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE.format(name="s").replace('after_all: [ "exit 3" ]', hook))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"POST {url}/seed answered 200, expected 201" in done.stdout + done.stderr, done.stdout
