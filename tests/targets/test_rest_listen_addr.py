"""Where a rest target's callback listener (`response.listen`) binds: a `url` (a tunnel's) needs the fixed `addr` it
leads to, and runs on a fixed `addr` never bind it at once. Through `tamesu`, against the local callback agent
(`agents.rest_agents`, `POST /bot`)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

from agents.fixtures import RunningAgents, rest_agents

__all__ = ["rest_agents"]  # a fixture, imported to be found by pytest


def test_a_listen_url_without_a_fixed_addr_is_refused_where_written(tamesu: Callable, tmp_path: Path) -> None:
    # before: accepted; the listener took a free port the url (a tunnel's) could not lead to, every post of the
    # agent went nowhere and each turn timed out, the agent blamed (exit 1)
    (tmp_path / "suite.yaml").write_text("""\
targets:
  bot:
    type: rest
    url: http://127.0.0.1:9/bot
    response: { listen: { url: "https://tunnel.example.com/hook" } }
  free:
    type: rest
    url: http://127.0.0.1:9/bot
    response: { listen: { addr: "127.0.0.1:0", url: "https://tunnel.example.com/hook" } }
  fixed:
    type: rest
    url: http://127.0.0.1:9/bot
    response: { listen: { addr: "127.0.0.1:18953", url: "https://tunnel.example.com/hook" } }
tests:
  - { name: one, target: bot, scenario: { script: [ { say: hi } ] } }
  - { name: two, target: free, scenario: { script: [ { say: hi } ] } }
  - { name: three, target: fixed, scenario: { script: [ { say: hi } ] } }
""")
    result = tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    why = ("url needs addr: the port the url leads to, where the listener binds (without addr, or with port 0, "
           "it takes a free port, which the url cannot know)")
    assert result.stderr.splitlines() == [f"suite.yaml:5:25: targets.bot.response.listen: {why}",
                                          f"suite.yaml:9:25: targets.free.response.listen: {why}",
                                          "2 problems found"], result.stderr


def test_runs_whose_listener_has_a_fixed_port_never_run_at_once(rest_agents: RunningAgents, tamesu: Callable,
                                                                tmp_path: Path) -> None:
    # before: under --parallel (or --repeat with it) the second run could not bind listen.addr, which the first
    # held: "cannot listen on 127.0.0.1:PORT: Address already in use", exit 3. One post a run ("Bye"): a later
    # one could reach the next run's listener on the same port.
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    (tmp_path / "suite.yaml").write_text(f"""\
targets:
  bot:
    type: rest
    url: "{rest_agents.url}/bot"
    request: {{ body: {{ text: "{{{{message}}}}", callback: "{{{{listen.url}}}}" }} }}
    response: {{ listen: {{ addr: "127.0.0.1:{port}", path: /hook, idle: 5s, done: $.end }} }}
tests:
  - {{ name: one, target: bot, scenario: {{ script: [ {{ say: bye }} ] }} }}
  - {{ name: two, target: bot, scenario: {{ script: [ {{ say: bye }} ] }} }}
""")
    result = tamesu(["run", "suite.yaml", "--parallel", "2", "--repeat", "2", "--out", "out"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed, 0 failed" in result.stdout, result.stdout
    runs = [json.loads(path.read_text()) for path in (tmp_path / "out").rglob("result.json")]
    heard = {turn["agent"]["text"] for run in runs for turn in run["turns"]}
    assert len(runs) == 4 and heard == {"Bye"}, heard
