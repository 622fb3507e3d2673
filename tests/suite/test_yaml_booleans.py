"""A boolean anywhere in what a user writes is YAML 1.2's `true` or `false`: `yes`, `no`, `on`, `off` (YAML 1.1's,
text to tamesu's reader), a quoted "true" or a 1 is one line `"yes" is not a boolean: write true or false` at the
value. Before, only the assertions' options refused them (session 35); every other boolean of the suite, its
targets and tamesu.yaml read `no` and `off` as true, and `yes` too, without a word."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu

_SUITE = """\
models:
  shop: { provider: fake, rules: [ { when: "(?i)hello", say: "Hi", stop: yes } ] }
targets:
  shop: { type: model, model: shop }
  agent: { type: a2a, url: "http://127.0.0.1:9/a2a", stream: on }
  page:
    type: browser
    url: "http://127.0.0.1:9/"
    headless: off
    chat: { input: "#q", messages: ".m", greeting: "no" }
  phone: { type: voice, url: "ws://127.0.0.1:9/ws", greeting: 1 }
tests:
  - name: a chat
    target: shop
    scenario: { script: [ { say: "hello" } ] }
    assert:
      - contains: { value: hi, ignore_case: true }
"""


def test_every_boolean_of_a_suite_and_the_project_takes_true_or_false_only(tmp_path: Path) -> None:
    (tmp_path / "tamesu.yaml").write_text("suites: [s.tamesu.yaml]\nyao_errors: off\n")
    (tmp_path / "s.tamesu.yaml").write_text(_SUITE)
    done = run_tamesu(["validate"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = sorted(line for line in (done.stdout + done.stderr).splitlines() if ".yaml:" in line)
    assert said == sorted([
        's.tamesu.yaml:2:74: models.shop.rules[0].stop: "yes" is not a boolean: write true or false',
        's.tamesu.yaml:5:62: targets.agent.stream: "on" is not a boolean: write true or false',
        's.tamesu.yaml:9:15: targets.page.headless: "off" is not a boolean: write true or false',
        's.tamesu.yaml:10:52: targets.page.chat.greeting: "no" is not a boolean: write true or false',
        's.tamesu.yaml:11:63: targets.phone.greeting: 1 is not a boolean: write true or false',
        'tamesu.yaml:2:13: yao_errors: "off" is not a boolean: write true or false',
    ]), done.stdout + done.stderr
