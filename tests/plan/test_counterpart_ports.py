"""A counterpart whose target binds the port the test's target binds is refused where written, and so is a remote
agent's `addr` that another remote agent or a test's target binds too, the addresses compared as the machine binds
them: `0.0.0.0:P` takes every address's P, and this machine's loopback names are one."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from conftest import run_tamesu
from tamesu.net.serve import bind_socket


def test_every_interface_and_a_loopback_name_on_one_port_cannot_both_be_bound() -> None:
    # what the check stands for, as tamesu's listeners bind (SO_REUSEADDR): the second bind fails
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    first = bind_socket("0.0.0.0", port)
    try:
        with pytest.raises(OSError) as caught:
            bind_socket("127.0.0.1", port).close()
        assert caught.value.errno == errno.EADDRINUSE
    finally:
        first.close()


def test_a_counterpart_on_the_targets_port_spelt_otherwise_is_refused_where_written(tmp_path: Path) -> None:
    # before: only the same string was caught; 0.0.0.0:P beside 127.0.0.1:P (or localhost:P) validated, and every
    # run was exit 3, "Address already in use", the second listener of the run
    (tmp_path / "suite.yaml").write_text("""\
targets:
  buyer: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "127.0.0.1:18961" } }
  everywhere: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "0.0.0.0:18961" } }
  named:
    type: rest
    url: http://127.0.0.1:9/bot
    response: { listen: { addr: "localhost:18961" } }
  elsewhere: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "192.0.2.7:18961" } }
  next_port: { type: a2a, url: "http://127.0.0.1:9/a2a", push: { addr: "0.0.0.0:18962" } }
tests:
  - { name: all, target: buyer, counterpart: { target: everywhere, opening: hi }, scenario: { max_turns: 2 } }
  - { name: local, target: buyer, counterpart: { target: named, opening: hi }, scenario: { max_turns: 2 } }
  - { name: other host, target: buyer, counterpart: { target: elsewhere, opening: hi }, scenario: { max_turns: 2 } }
  - { name: other port, target: buyer, counterpart: { target: next_port, opening: hi }, scenario: { max_turns: 2 } }
""")
    result = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    rest = "both listen for the whole run, so give one of them another port (or none: a free one)"
    assert result.stderr.splitlines() == [
        "suite.yaml:11:56: tests[0].counterpart.target: the counterpart everywhere binds 0.0.0.0:18961 where the "
        f"test's target buyer binds 127.0.0.1:18961: {rest}",
        "suite.yaml:12:58: tests[1].counterpart.target: the counterpart named binds localhost:18961 where the test's "
        f"target buyer binds 127.0.0.1:18961: {rest}",
        "2 problems found"], result.stderr


def test_a_remote_agent_on_a_port_a_target_or_another_remote_agent_binds_is_refused_where_written(
        tmp_path: Path) -> None:
    # before: valid, and every run exit 3 ("a2a target buyer: cannot listen for push notifications on
    # localhost:18971: [Errno 98] Address already in use"): the remote agents and the target listen for the whole run
    (tmp_path / "suite.yaml").write_text("""\
remote_agents:
  billing: { reply: "Refunded" }
  ledger: { reply: "Booked", addr: "127.0.0.1:18971" }
  stock: { reply: "In stock", addr: "0.0.0.0:18971" }
  shipping: { reply: "Shipped", addr: "127.0.0.1:18972" }
targets:
  buyer: { type: a2a, url: "{{remote.billing.url}}", push: { addr: "localhost:18971" } }
tests:
  - { name: one, target: buyer, scenario: { script: [ { say: hi } ] } }
  - { name: two, target: buyer, scenario: { script: [ { say: hi } ] } }
""")
    result = run_tamesu(["validate", "suite.yaml"], cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    rest = "both listen for the whole run, so give one of them another port (or none: a free one)"
    assert result.stderr.splitlines() == [  # once, however many tests meet it
        "suite.yaml:3:36: remote_agents.ledger.addr: the remote agent ledger binds 127.0.0.1:18971 where target "
        f"buyer binds localhost:18971: {rest}",
        "suite.yaml:4:37: remote_agents.stock.addr: the remote agent stock binds 0.0.0.0:18971 where remote agent "
        f"ledger binds 127.0.0.1:18971: {rest}",
        "2 problems found"], result.stderr
