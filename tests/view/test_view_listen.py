"""Where `tamesu view` listens: its usual port, or a free one when `tamesu init`'s sample agent (or anything else)
holds it; another address only when asked, with a warning."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tamesu.cli.store import VIEW_PORT
from view.conftest import View

pytest.importorskip("sqlalchemy", reason="the store extra is not installed (pip install -e '.[store]')")


@contextlib.contextmanager
def _held(port: int) -> Iterator[None]:
    """`port` on 127.0.0.1 taken for the block: by this test, or already by someone else."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(OSError):  # taken already: as good for this test
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        yield
    finally:
        sock.close()


def _store(tmp_path: Path) -> dict[str, str]:
    """A store made and empty: the view shows one, and says when there is none."""
    from tamesu.store.db import Store

    path = tmp_path / "s.db"
    made = Store(f"sqlite:///{path}")
    made.migrate()
    made.close()
    return {"TAMESU_STORE": str(path)}


def _served(one: View) -> None:
    page = httpx.get(one.url + "/", timeout=10)
    assert page.status_code == 200, page.text[:500]


def test_a_taken_default_port_is_replaced_by_a_free_one(tmp_path: Path, view: Callable[..., View]) -> None:
    # before: "view: cannot listen on 127.0.0.1:8765: Address already in use", exit 3, beside the sample agent
    env = _store(tmp_path)
    with _held(VIEW_PORT):
        one = view(tmp_path, "--no-open", env=env, port=None)
        assert one.url.startswith("http://127.0.0.1:") and not one.url.endswith(f":{VIEW_PORT}"), one.url
        _served(one)
        one.stop()
        assert one.process.stderr is not None
        said = one.process.stderr.read()
        # it named tamesu init's sample agent, which has a port of its own now
        assert f"view: 127.0.0.1:{VIEW_PORT} is in use: serving on a free port" in said, said
        # a port asked for is kept to: taken, it is an infrastructure error
        taken = f"view: cannot listen on 127.0.0.1:{VIEW_PORT}: Address already in use"
        with pytest.raises(AssertionError, match=taken):
            view(tmp_path, "--no-open", env=env, port=str(VIEW_PORT))


def test_every_address_is_served_only_when_asked_and_warned(tmp_path: Path, view: Callable[..., View]) -> None:
    one = view(tmp_path, "--no-open", "--host", "0.0.0.0", env=_store(tmp_path))
    assert one.url.startswith("http://127.0.0.1:"), one.url  # the browser goes to this machine's loopback
    _served(one)
    one.stop()
    assert one.process.stderr is not None
    said = one.process.stderr.read()
    assert "view: listening on 0.0.0.0:" in said and "anyone who can reach this machine can read the run history" \
        in said, said
