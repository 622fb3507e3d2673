"""Ports for tests that need a place where nothing listens."""

from __future__ import annotations

import socket

_HELD: list[socket.socket] = []
"""Every refused_port's socket, bound and never listening until the test process ends."""


def refused_port() -> int:
    """A port on 127.0.0.1 where a connection is refused at once, and stays refused: its socket stays bound
    (never listening), so no server started later, by this test or by anything else on the machine, can be
    given it. (A probe socket closed at once frees the port for the next bind.)"""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    _HELD.append(sock)
    return int(sock.getsockname()[1])
