"""`tamesu doctor` renders a target's url as a run does: a `{{secrets.NAME}}` in its `user:password@`
percent-encoded, so a password holding `/` leaves the host whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import run_tamesu


def test_doctor_checks_a_url_whose_password_holds_a_slash_and_says_none_of_it(tmp_path: Path, serve: Any) -> None:
    # before: 'tamesu: internal error: ValueError: Port could not be cast to integer value as 'S3c'': the url
    # rendered as text, the password's `/` ended the host, and its head was said
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def chat(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hello")

    server = serve(Starlette(routes=[Route("/chat", chat, methods=["GET", "POST", "HEAD"])]))
    address = server.url.removeprefix("http://")
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot: {{ type: rest, url: 'http://u:{{{{secrets.PW}}}}@{address}/chat' }}
tests: [ {{ name: t, target: bot, scenario: {{ script: [ {{ say: hi }} ] }} }} ]
""")
    done = run_tamesu(["doctor", "suite.yaml"], cwd=tmp_path, env={"PW": "S3c/r3t?x#y"})
    said = done.stdout + done.stderr
    assert "internal error" not in said and "S3c" not in said, said
    [line] = [line for line in done.stdout.splitlines() if "target bot" in line]
    assert line.startswith(f"ok    target bot (rest) at http://u:***@{address}/chat: "), line


def test_doctor_asks_a_model_whose_base_url_password_holds_a_slash(tmp_path: Path, serve: Any) -> None:
    # before (15f05e91): the model's base_url rendered as text, the password's `/` ended the host ('bot:S3c' as
    # the host and port): the model was said unreachable, or an internal error quoted the password's head
    from model_servers import OpenAIServer, text

    bot = OpenAIServer()
    bot.plan(text("hello there"))
    url = bot.base_url(serve(bot.app).url).replace("http://", "http://bot:{{secrets.BOT_PW}}@")
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: ['suite.yaml']\nmodels:\n  bot: {{ provider: openai, model: gpt-4o-mini, base_url: '{url}' }}\n")
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot: { type: model, model: bot }
tests: [ { name: t, target: bot, scenario: { script: [ { say: hi } ] } } ]
""")
    done = run_tamesu(["doctor"], cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test", "BOT_PW": "S3c/r3t?x#y"})
    said = done.stdout + done.stderr
    assert "internal error" not in said and "S3c" not in said, said
    assert "ok    models.bot (openai:gpt-4o-mini): ready" in done.stdout.splitlines(), said
    assert bot.calls(), said  # the completion reached the model's server
