"""What a suite's `remote_agents:` entry says of itself where it is written: a `forward` that is no URL an agent can
be reached at, quoted as every problem line quotes what the user wrote."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tamesu


def test_a_forward_that_is_no_agents_url_is_quoted_in_double_quotes(tmp_path: Path) -> None:
    # before: got 'ftp://billing' (a Python repr), and "it's" came in double quotes around the apostrophe
    (tmp_path / "s.tamesu.yaml").write_text("""\
remote_agents:
  billing: { forward: "ftp://billing" }
  ledger: { forward: "grpc://ledger:50051/it's" }
  later: { forward: "{{env.LATER_URL}}" }
targets:
  orchestrator: { type: a2a, url: "http://127.0.0.1:9/a2a" }
tests:
  - { name: hello, target: orchestrator, scenario: { script: [ { say: hi } ] } }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path, env={"LATER_URL": "ftp://later"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        's.tamesu.yaml:2:23: remote_agents.billing.forward: forward: expected an http://, https://, grpc:// or '
        'grpcs:// URL, got "ftp://billing"',
        's.tamesu.yaml:3:22: remote_agents.ledger.forward: forward: expected grpc://host:port or grpcs://host[:port] '
        '(a gRPC agent is reached at an address, not a path), got "grpc://ledger:50051/it\'s"',
        "2 problems found"], done.stderr
    # a template is checked as it renders, when the run starts: the same words (exit 3)
    (tmp_path / "s.tamesu.yaml").write_text((tmp_path / "s.tamesu.yaml").read_text().replace(
        '  billing: { forward: "ftp://billing" }\n  ledger: { forward: "grpc://ledger:50051/it\'s" }\n', ""))
    done = run_tamesu(["run", "s.tamesu.yaml", "--out", "out"], cwd=tmp_path, env={"LATER_URL": "ftp://later"})
    assert done.returncode == 3, done.stdout + done.stderr
    assert ('remote agent later: forward: expected an http://, https://, grpc:// or grpcs:// URL, got "ftp://later"'
            in done.stdout), done.stdout


def test_a_name_no_template_can_write_is_said_at_the_name(tmp_path: Path) -> None:
    # before: valid, and refused only where {{remote.billing.v2.url}} was used, as another agent ("no remote agent
    # 'billing'"); a name never used in a template left its free port unreachable and validate said ok
    (tmp_path / "s.tamesu.yaml").write_text("""\
remote_agents:
  "billing.v2": { reply: "Refunded" }
  shipping desk: { reply: "Shipped", addr: "127.0.0.1:18956" }
  stock-2_b: { reply: "In stock" }
targets:
  orchestrator: { type: a2a, url: "http://127.0.0.1:9/a2a", metadata: { stock: "{{remote.stock-2_b.url}}" } }
tests:
  - { name: hello, target: orchestrator, scenario: { script: [ { say: hi } ] } }
""")
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = 'cannot be written in {{remote.NAME.url}}: a template\'s names are letters, digits, _ and -'
    assert done.stderr.splitlines() == [
        f'warning: s.tamesu.yaml:3:3: remote_agents.shipping desk: the name "shipping desk" {said} (shipping_desk '
        "could); its fixed addr reaches it, but no template can give its URL, card or grpc address",
        f's.tamesu.yaml:2:3: remote_agents.billing.v2: the name "billing.v2" {said} (billing_v2 could), and without '
        "addr that template is the only way its URL (a free port) reaches a caller: rename it",
        "1 problem found"], done.stderr
    # beside a fixed addr, a warning only: the suite validates
    (tmp_path / "s.tamesu.yaml").write_text((tmp_path / "s.tamesu.yaml").read_text().replace(
        '  "billing.v2": { reply: "Refunded" }\n', ""))
    done = run_tamesu(["validate", "s.tamesu.yaml"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'remote_agents.shipping desk: the name "shipping desk"' in done.stderr, done.stderr
