"""A real PostgreSQL for the store's tests: Debian's binaries, a temporary data directory, a free loopback port.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user (or `nobody`) in a folder
that user owns. Anything that keeps it from starting is a skip with the reason, never a failure.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _pg_bin() -> Path:
    """TAMESU_PG_BIN, else Debian's newest /usr/lib/postgresql/<version>/bin."""
    if os.environ.get("TAMESU_PG_BIN"):
        return Path(os.environ["TAMESU_PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3])
                   if p.parts[-3].isdigit() else 0)
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


class CannotStart(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        if not (PG_BIN / "initdb").is_file():
            raise CannotStart(f"no PostgreSQL binaries in {PG_BIN} (apt-get install postgresql)")
        self.user: str | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                try:
                    pwd.getpwnam(name)
                except KeyError:
                    continue
                self.user = name
                break
            if self.user is None:
                raise CannotStart("running as root and no unprivileged user (postgres, nobody) to run the server")
        self.root = Path(tempfile.mkdtemp(prefix="tamesu-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)

    def _as_server_user(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        command = ["runuser", "-u", self.user, "--", *args] if self.user else args
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=self.root, env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"})

    def start(self) -> PostgresServer:
        done = self._as_server_user([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "tamesu",
                                     "--auth=trust", "--no-sync", "-E", "UTF8"], timeout=120)
        if done.returncode != 0:
            self.cleanup()
            raise CannotStart(f"initdb failed: {done.stderr.strip()[-300:]}")
        logfile = self.root / "log"
        for attempt in range(3):
            options = f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off -c max_connections=50"
            before = logfile.stat().st_size if logfile.exists() else 0
            done = self._as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", options, "-w",
                                         "-t", "60", "-l", str(logfile), "start"], timeout=90)
            if done.returncode == 0:
                return self
            log = logfile.read_bytes()[before:].decode(errors="replace") if logfile.exists() else ""
            # the free port was taken between finding it and the server binding it (the machine is shared):
            # another port, rather than skipping every store test
            if "already in use" not in log or attempt == 2:
                break
            self.port = _free_port()
        self.cleanup()
        raise CannotStart(f"pg_ctl start failed: {done.stderr.strip()[-200:]} {log[-300:]}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://tamesu@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        self._as_server_user([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                             timeout=60)
        self.cleanup()

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
