"""The model target through `tamesu run` against the local OpenAI- and Anthropic-shaped servers: what a repeated
test asks the model, with the replay cache on (the default), and an answer that is not the model's whole answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from model_servers import AnthropicServer, OpenAIServer, text
from ports import refused_port
from tamesu.net.serve import ThreadServer

Serve = Callable[[Any], ThreadServer]

SUITE = """\
targets:
  bot: { type: model, model: bot, system: "You are the shop's assistant." }
tests:
  - name: greets
    target: bot
    repeat: 3
    scenario: { script: [ { say: "Say hello" } ] }
    assert: [ { contains: hello } ]
"""


def test_each_run_of_a_repeated_model_target_asks_the_model(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: run 1 asked the model and runs 2 and 3 replayed its answer from the cache (the same request), so a
    # model right once in three passed 3 of 3, pass^3 1.00, on one answer
    bot = OpenAIServer()
    bot.plan(text("hello there"), text("goodbye"), text("goodbye"))
    url = bot.base_url(serve(bot.app).url)
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: ['suite.yaml']\nmodels:\n  bot: {{ provider: openai, model: gpt-4o-mini, base_url: '{url}' }}\n")
    (tmp_path / "suite.yaml").write_text(SUITE)

    def passed(*options: str) -> list[bool]:
        done = tamesu(["run", "--out", "out", "--color", "never", *options], cwd=tmp_path,
                      env={"OPENAI_API_KEY": "sk-test"})
        assert done.returncode == 1, done.stdout + done.stderr
        newest = max((tmp_path / "out").iterdir())
        [line] = (newest / "results.jsonl").read_text().splitlines()
        runs = json.loads(line)["runs"]
        return sorted(json.loads((newest / run["dir"] / "result.json").read_text())["status"] == "passed"
                      for run in runs)

    assert passed() == [False, False, True]
    assert len(bot.calls()) == 3
    # each run's answer was recorded under its own key: a replay gives the same verdicts, asking nothing
    assert passed("--cache-only") == [False, False, True]
    assert len(bot.calls()) == 3


def test_an_answer_cut_at_the_token_limit_or_withheld_is_said(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: the turn was the cut text and the test failed on half a sentence, the agent's fault, without a word
    # of the cut (only the raw response's finish_reason knew)
    gpt, claude = OpenAIServer(), AnthropicServer()
    gpt.plan(text("Your refund is", stop="length"), text("", stop="content_filter"))
    claude.plan(text("Your refund is", stop="length"), text("", stop="refusal"),
                text("Your refund", stop="model_context_window_exceeded"))
    urls = [server.base_url(serve(server.app).url) for server in (gpt, claude)]
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  gpt: {{ provider: openai, model: gpt-4o-mini, base_url: '{urls[0]}' }}\n"
        f"  claude: {{ provider: anthropic, model: claude-haiku-4-5, base_url: '{urls[1]}' }}\n")
    tests = "".join(
        f"  - {{ name: {name}, target: {target}, scenario: {{ script: [ {{ say: 'When is my refund?' }} ] }},"
        " assert: [ { contains: days } ] }\n"
        for name, target in (("gpt cut", "gpt"), ("gpt withheld", "gpt"), ("claude cut", "claude"),
                             ("claude withheld", "claude"), ("claude full", "claude")))
    (tmp_path / "suite.yaml").write_text(
        "targets:\n  gpt: { type: model, model: gpt, max_tokens: 3 }\n  claude: { type: model, model: claude }\n"
        f"tests:\n{tests}")
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path,
                  env={"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-test"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "along the way: 3 model answers cut short (max_tokens or the context window) (model_answer_cut, 3 tests); " \
        "2 model answers withheld by the server (content filter or refusal) (model_answer_withheld, 2 tests)" \
        in done.stdout, done.stdout
    [directory] = list((tmp_path / "out").iterdir())

    def said(test: str) -> list[tuple[str, dict[str, Any]]]:
        [result] = list(directory.glob(f"suite/{test}/run-1/result.json"))
        return [(e["name"], e["data"]) for e in json.loads(result.read_text())["events"]
                if e["name"].startswith("model_answer_")]

    [(name, data)] = said("gpt-cut")
    assert name == "model_answer_cut" and data["finish_reason"] == "length" and data["max_tokens"] == 3
    assert data["note"] == ("the model's answer was cut at its token limit (max_tokens 3): the turn holds what it "
                            "wrote until then (raise max_tokens for the whole answer)")
    [(name, data)] = said("claude-cut")
    assert name == "model_answer_cut" and data["finish_reason"] == "max_tokens" and data["max_tokens"] is None
    assert [(name, data["finish_reason"]) for name, data in said("gpt-withheld") + said("claude-withheld")] == [
        ("model_answer_withheld", "content_filter"), ("model_answer_withheld", "refusal")]
    [(name, data)] = said("claude-full")
    assert name == "model_answer_cut" and data["note"].startswith(
        "the model's answer was cut where the conversation filled its context window")


def test_the_transport_event_names_the_fallback_the_model_falls_to(tmp_path: Path, tamesu: Any) -> None:
    # before: `fallback: None` when the model under `models:` had its own, which the turn then used (a
    # model_fallback event followed, naming it)
    dead = f"http://127.0.0.1:{refused_port()}/v1"
    (tmp_path / "tamesu.yaml").write_text(
        "suites: ['suite.yaml']\ncache: { mode: off }\nmodels:\n"
        f"  bot: {{ provider: openai, model: gpt-4o-mini, base_url: '{dead}', max_retries: 0, fallback: spare }}\n"
        "  spare: { provider: fake, model: spare, rules: [ { say: hello } ] }\n"
        "  last: { provider: fake, model: last, rules: [ { say: hello } ] }\n")
    (tmp_path / "suite.yaml").write_text(
        "targets:\n  own: { type: model, model: bot }\n  both: { type: model, model: bot, fallback: last }\n"
        "tests:\n" + "".join(f"  - {{ name: {name}, target: {name}, scenario: {{ script: [ {{ say: hi }} ] }} }}\n"
                             for name in ("own", "both")))
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path, env={"OPENAI_API_KEY": "sk-test"})
    assert done.returncode == 0, done.stdout + done.stderr
    newest = max((tmp_path / "out").iterdir())
    said = {}
    for line in (newest / "results.jsonl").read_text().splitlines():
        [run] = json.loads(line)["runs"]
        events = json.loads((newest / run["dir"] / "result.json").read_text())["events"]
        transport = next(e["data"] for e in events if e["name"] == "transport")
        fell = next(e["data"] for e in events if e["name"] == "model_fallback")
        said[run["dir"].split("/")[-2]] = (transport["fallback"], transport.get("fallbacks"), fell["fallback"])
    assert said == {"own": ("fake:spare", None, "fake:spare"),
                    "both": ("fake:spare", ["fake:spare", "last"], "fake:spare")}, said


def test_a_templated_password_in_a_models_base_url_is_sent_whole(tmp_path: Path, tamesu: Any, serve: Serve) -> None:
    # before: base_url was rendered as text, so the `/` of the password ended the host early (`bot:a` as the
    # host, the port `a`): the model could not be reached; rendered as a URL its userinfo is percent-encoded
    bot = OpenAIServer()
    bot.plan(text("hello there"))
    url = bot.base_url(serve(bot.app).url).replace("http://", "http://bot:{{secrets.BOT_PW}}@")
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: ['suite.yaml']\nmodels:\n  bot: {{ provider: openai, model: gpt-4o-mini, base_url: '{url}' }}\n")
    (tmp_path / "suite.yaml").write_text(SUITE.replace("repeat: 3", "repeat: 1"))
    done = tamesu(["run", "--out", "out", "--color", "never"], cwd=tmp_path,
                  env={"OPENAI_API_KEY": "sk-test", "BOT_PW": "s3/cr?t"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(bot.calls()) == 1
    assert not [p for p in (tmp_path / "out").rglob("*") if p.is_file() and b"s3/cr?t" in p.read_bytes()]


def test_a_script_tests_model_target_sends_a_templated_password_whole(tmp_path: Path, serve: Serve,
                                                                       monkeypatch: Any) -> None:
    # the project's models as `tamesu.testing` and `tamesu test -i agents:` make them (engine.models.project_models):
    # before 15f05e91 their base_url was rendered as text there too, the password's `/` ending the host
    from tamesu.testing import AgentSession

    bot = OpenAIServer()
    bot.plan(text("hello there"))
    url = bot.base_url(serve(bot.app).url).replace("http://", "http://bot:{{secrets.BOT_PW}}@")
    (tmp_path / "tamesu.yaml").write_text(
        f"suites: []\ntargets:\n  bot: {{ type: model, model: bot }}\n"
        f"models:\n  bot: {{ provider: openai, model: gpt-4o-mini, base_url: '{url}' }}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("BOT_PW", "s3/cr?t")
    with AgentSession.open("bot", project=tmp_path) as agent:
        assert agent.send("Say hello").text == "hello there"
    assert len(bot.calls()) == 1
