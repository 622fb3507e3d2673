"""`tamesu ARGS` as a real child process that skips Python's start-up: a fork of a warm process.

Most tests that run the command want its exit code and output, and each `python -m tamesu` spends about half a
second importing tamesu and its libraries before it reads its arguments; some 300 such runs were most of the
inner loop's CPU time. Here one "zygote" per pytest process (one per run under xdist, shared by its workers)
imports those modules once and then only forks: the fork gets the caller's stdin and two pipes as stdout and
stderr, takes the caller's working folder, environment and arguments, and runs `python -m tamesu` as the
interpreter would (`runpy`, so `sys.argv[0]`, `__main__` and the usage line are the same). It is a process of
its own, with its own pid, signals, exit code, children and clean-up on exit; only what Python imported before
the arguments is shared.

A run whose environment changes how Python starts (a `PYTHON*` variable, the locale) is not one the zygote can
stand in for, so it runs as a plain child process, as do all runs when `TAMESU_TEST_FORK=0`; but a PYTHONPATH
of folders the fork can put on `sys.path` as Python would (a plug-in's) is forked too (`_put_on_path`), and
one it cannot (a folder with a `sitecustomize`, or a module the zygote has imported) is exec'd afresh by the fork.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

WARM = ("tamesu.cli.main", "tamesu.cli.test", "tamesu.cli.validate", "tamesu.cli.store", "tamesu.plan",
        "tamesu.engine", "tamesu.report", "tamesu.targets.rest.target", "tamesu.targets.a2a",
        "tamesu.targets.mcp.target",
        "tamesu.net.clients", "tamesu.net.serve", "tamesu.models.fake", "tamesu.runtime.signals",
        # what every run imports after it has read its arguments: the runner, roles, the judge, the model
        # target and clients, reports, the JSONL loader, and the default store with its migrations (SQLAlchemy
        # and alembic: some 250 modules). Without them a forked `tamesu run` spent 0.49 s of CPU importing
        # and 0.06 s running (a one-test suite on the fake models)
        "tamesu.engine.runner", "tamesu.engine.live", "tamesu.roles", "tamesu.roles.judge",
        "tamesu.roles.simulator", "tamesu.roles.case_user", "tamesu.checks.judge", "tamesu.checks.text",
        "tamesu.checks.span", "tamesu.checks.json_path", "tamesu.targets.model", "tamesu.models.client",
        "tamesu.results.rundir", "tamesu.telemetry.collector", "tamesu.remote.group", "tamesu.report.baseline",
        "tamesu.report.html", "tamesu.report.console", "tamesu.report.recorder", "tamesu.report.formats",
        # the rest target's modules (its package imports none of them: 8 ms of every run, test and validate
        # fork), the JUnit and JSON reports (12 and 21 ms of a run that writes them), the BOM-tolerant codec
        "tamesu.report.junit", "tamesu.report.json_report", "encodings.utf_8_sig",
        "tamesu.report.emit", "tamesu.report.case_console", "tamesu.report.case_records", "tamesu.cli.jsonl_runner",
        "tamesu.jsonl", "tamesu.jsonl.parser", "tamesu.jsonl.run", "tamesu.store.writer", "tamesu.store.db",
        "alembic.command", "alembic.config", "alembic.runtime.migration", "alembic.operations", "alembic.script",
        "sqlalchemy.dialects.sqlite", "sqlite3", "jsonpath", "statistics",
        # what every fork still imported as it ran (sys.modules of a fork less the zygote's): rich's emoji table
        # (its console prints with emoji on), `_strptime` (it rebuilds its tables if the locale changes), the
        # resource readers, the run's heap settings and fake-model rules, `tamesu test`'s input sources;
        # 4 ms of a `tamesu run` fork's 70 and 10 ms of a `tamesu test` fork's 78
        "rich._emoji_codes", "_strptime", "importlib.readers", "importlib.resources.readers", "tamesu.engine.heap",
        "tamesu.plan._fake_rules", "tamesu.jsonl.generator", "tamesu.jsonl.sources", "tamesu.roles.generator",
        # the model SDKs a run imports at its first model call (anthropic 1.8 s of CPU, openai 0.5 s): some 30
        # runs of the inner loop call a model server. They read OPENAI_LOG/ANTHROPIC_LOG as they are imported,
        # which no test sets
        "openai", "anthropic", "openai.resources.chat.completions", "tamesu.models.openai",
        "tamesu.models.anthropic", "tamesu.models._sdk_post",
        # the MCP SDK's server side, which every MCP server of the tests (tests/agents/mcp_servers.py, forked
        # through `script_command`) imports before it reads its arguments. A second warm process of their own
        # imported them for 0.9-1.05 s of CPU; here they add 0.3-0.5 s (mcp_types, the costly part, is the
        # client's too)
        "mcp.server.mcpserver", "mcp.server.mcpserver.exceptions", "mcp.server.stdio",
        "mcp.server.streamable_http", "mcp.server.streamable_http_manager", "mcp_types", "uvicorn",
        "uvicorn.config", "uvicorn.server", "uvicorn.protocols.http.h11_impl", "uvicorn.lifespan.on",
        "uvicorn.loops.asyncio", "starlette.applications", "argparse",
        # a2a-sdk's server side, which the example A2A shop (examples/a2a-shop, forked through `script_command`
        # by test_example_a2a_shop.py and the A2A demo) imports before it listens: 0.3 s of CPU once here, not in
        # each of its some ten starts a run (grpc, uvicorn and starlette are above already)
        "a2a.server.agent_execution", "a2a.server.context", "a2a.server.request_handlers", "a2a.server.routes",
        "a2a.server.tasks", "a2a.compat.v0_3.grpc_handler", "a2a.compat.v0_3.a2a_v0_3_pb2_grpc",
        "a2a.types.a2a_pb2_grpc", "starlette.middleware",
        # the browser target's modules and Playwright's client (some 110 modules, 0.1 s of CPU in each of the some
        # 60 browser runs of the tests; Playwright reads its DEBUG log switch as it is imported, which no test sets)
        "playwright.async_api", "tamesu.targets.browser._browser", "tamesu.targets.browser._actions",
        "tamesu.targets.browser._chat", "tamesu.targets.browser._watch", "tamesu.targets.browser._calls",
        "tamesu.targets.browser._goal", "tamesu.targets.browser._frames", "tamesu.targets.browser._visual",
        "tamesu.targets.browser._a11y", "tamesu.targets.browser.validate")
"""What the zygote imports before it forks: the command line, the loader and engine, the HTTP targets that
most runs use, what a run imports once it has started, and what the tests' MCP servers and the example A2A shop
import. None of them (but the SDKs' log switches) reads the environment or the working folder when imported, and
none starts a thread (a fork copies only the thread that forks, so the zygote checks it is alone). Tests that
look at what a run imports run plain children, not forks."""

_STARTUP_KEYS = ("PYTHON", "LC_", "LANG")
"""Environment variables Python reads when it starts: a run that changes one needs an interpreter of its own."""

_HEADER = struct.Struct("!I")


def _zygote(listen_path: str, lazy: bool = False) -> None:
    """Serve fork requests until the pytest process that started us closes our stdin. `lazy` (the one an xdist
    controller starts for its workers, `start_for_workers`): listening at once, importing only when the first
    request comes, so a run whose tests fork nothing pays for an idle interpreter. The forks run `python -m
    tamesu`, or `python SCRIPT` where the request names one."""
    import gc
    import importlib

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if lazy:
        _listen(listener, listen_path)
        if listener not in select.select([listener, sys.stdin], [], [])[0]:
            return  # the pytest process ended before any test asked
    _started_env.update(os.environ)
    for name in WARM:
        importlib.import_module(name)
    gc.freeze()  # the forks' collections leave the imported objects alone, so their memory stays shared
    if threading.active_count() != 1:
        raise SystemExit("tamesu test zygote: importing WARM started a thread; it cannot fork safely")
    if not lazy:
        _listen(listener, listen_path)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD writes to the wake-up pipe
    waiting: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    selector.register(sys.stdin, selectors.EVENT_READ, "parent")
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                return  # the pytest process ended
            if key.data == "child":
                os.read(wake_read, 4096)
                _reap(waiting, selector)
                continue
            if isinstance(key.data, int):
                _caller_gone(key.data, waiting, selector)
                continue
            connection, _ = listener.accept()
            try:
                request, fds = _receive(connection)
            except (_CutShort, OSError):  # its caller went before it asked: nothing to start, the next may come
                connection.close()
                continue
            if request.get("ping"):  # a worker waiting for a lazy start's imports (`_ping`)
                with contextlib.suppress(OSError):
                    connection.sendall(b"ready\n")
                connection.close()
                continue
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for fd in (wake_read, wake_write):
                    os.close(fd)
                selector.close()
                listener.close()
                connection.close()
                for waiter in waiting.values():
                    waiter.close()
                if "script" not in request:
                    _become_module(request, fds)
                _become_script(request, fds)
            for fd in fds:
                os.close(fd)
            waiting[pid] = connection
            try:
                connection.sendall(f"{pid}\n".encode())
            except OSError:  # its caller went as the fork started (a killed launcher): the fork goes too
                os.kill(pid, signal.SIGKILL)  # not reaped yet, so the pid is still this fork's
            else:
                selector.register(connection, selectors.EVENT_READ, pid)
            _reap(waiting, selector)  # a child that ended before it was registered


def _listen(listener: socket.socket, path: str) -> None:
    listener.bind(path)
    listener.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def _reap(waiting: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    for pid in list(waiting):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            connection = waiting.pop(pid)
            with contextlib.suppress(KeyError):  # its caller went first (`_caller_gone`)
                selector.unregister(connection)
            with contextlib.suppress(OSError):  # the caller gave up on it (a timeout) and went
                connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            connection.close()


def _caller_gone(pid: int, waiting: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    """The caller closed its connection while its fork runs (a killed `script_command` launcher: SIGKILL
    cannot be passed on): the fork goes too, as a child killed with its process group would."""
    connection = waiting.get(pid)
    if connection is None:
        return
    try:
        if connection.recv(1):
            return  # callers send nothing after their request; a byte is no end
    except OSError:
        pass
    selector.unregister(connection)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class _CutShort(Exception):
    """A caller that went before its request was whole (a launcher killed as it started)."""


def _receive(connection: socket.socket) -> tuple[dict[str, object], list[int]]:
    head, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
    try:
        if len(head) != _HEADER.size:
            raise _CutShort
        (size,) = _HEADER.unpack(head)
        body = b""
        while len(body) < size:
            chunk = connection.recv(size - len(body))
            if not chunk:
                raise _CutShort
            body += chunk
        return json.loads(body), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _take_the_callers(request: dict[str, object], fds: list[int]) -> dict[str, str]:
    """In the fork: the caller's stdio, folder and environment (returned)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    nice = request.get("nice")
    if isinstance(nice, int) and nice != os.getpriority(os.PRIO_PROCESS, 0):
        # the caller's, as a child of its own would have (conftest); below the warm process's only for root
        with contextlib.suppress(PermissionError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    return env


def _become_module(request: dict[str, object], fds: list[int]) -> None:
    """In the fork: the caller's stdio, folder, environment and arguments, then `python -m tamesu` (or the
    module the request names)."""
    import runpy

    env = _take_the_callers(request, fds)
    module = str(request.get("module", "tamesu"))
    sys.path[0] = os.getcwd()  # what `python -m` puts first
    args = request["args"]
    assert isinstance(args, list)
    sys.argv = ["-m", *map(str, args)]
    if request.get("as_user") and os.geteuid() == 0:
        _drop_file_mode_overrides()
    if not _starts_as_we_did(env):
        os.execve(sys.executable, [sys.executable, "-m", module, *map(str, args)], env)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    _finish(code)


_started_env: dict[str, str] = {}
"""The zygote's own environment as it started (what its imports saw)."""


def _starts_as_we_did(env: dict[str, str]) -> bool:
    """Whether a fork can stand in for an interpreter started with `env`: the variables Python reads as it starts
    are the zygote's, but for a PYTHONPATH the fork can put on `sys.path` (where the zygote had none). A caller
    through `tamesu_command` is not checked before it asks, so the fork asks here."""
    keys = {key for key in {*env, *_started_env} if key.startswith(_STARTUP_KEYS)}
    differ = {key for key in keys if env.get(key) != _started_env.get(key)}
    if not differ:
        return True
    return differ == {"PYTHONPATH"} and "PYTHONPATH" not in _started_env and _put_on_path(env["PYTHONPATH"])


def _put_on_path(python_path: str) -> bool:
    """A caller's PYTHONPATH (the zygote started without one) on `sys.path` where the interpreter puts it, right
    after the first entry, when a fork can stand in for an interpreter started with it: every entry a folder,
    none holding a module the zygote has imported (a fork would keep the zygote's) or one Python imports only
    as it starts (`sitecustomize`, which the hidden-module folders use). False: a fresh interpreter is needed."""
    import importlib

    entries = python_path.split(os.pathsep)
    if not all(entries) or not all(os.path.isdir(entry) for entry in entries):
        return False
    taken = {name.partition(".")[0] for name in sys.modules} | {"sitecustomize", "usercustomize"}
    if any(name.partition(".")[0] in taken for entry in entries for name in os.listdir(entry)):
        return False
    sys.path[1:1] = [os.path.abspath(entry) for entry in entries]
    importlib.invalidate_caches()
    return True


def _become_script(request: dict[str, object], fds: list[int]) -> None:
    """In the fork: the launcher's stdio, folder, environment and arguments, then `python SCRIPT ARGS`."""
    import runpy

    _take_the_callers(request, fds)
    script = os.path.abspath(str(request["script"]))
    args = request["args"]
    assert isinstance(args, list)
    sys.argv = [script, *map(str, args)]
    sys.path[0] = os.path.dirname(script)  # what `python SCRIPT` puts first
    try:
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    _finish(code)


_FILE_MODE_OVERRIDES = (1, 2)
"""CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: what lets root read and write past file modes."""


def _drop_file_mode_overrides() -> None:
    """In the fork of a root process: give up for good the two capabilities that let root ignore file modes, as
    `setpriv --bounding-set=-dac_override,-dac_read_search` does for a new process, so a file's modes hold as for
    a user. Here and not with setpriv: a setpriv child would start Python afresh (half a second of imports)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, version_3 = 24, 0x20080522
    for cap in _FILE_MODE_OVERRIDES:
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")
    header = (ctypes.c_uint32 * 2)(version_3, 0)
    sets = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: capabilities 0-31, then 32-63
    if libc.capget(header, sets) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    keep = ~sum(1 << cap for cap in _FILE_MODE_OVERRIDES) & 0xFFFFFFFF
    for index in range(3):
        sets[index] &= keep
    if libc.capset(header, sets) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _exit_code(value: object) -> int:
    """What the interpreter makes of `sys.exit(value)`."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _finish(code: int) -> None:
    """The interpreter's own exit, less freeing every object inherited from the zygote (which would copy all
    of its memory, page by page, into a process about to end): threads joined, `atexit`, streams flushed."""
    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls first on exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


class _Zygote:
    def __init__(self, lazy: bool = False, path: str | None = None) -> None:
        """This pytest process's own warm process, ended by `close` (or by the kernel closing its stdin on any
        death); `lazy`: one that imports at its first request (`start_for_workers`); `path`: the one listening
        there, which another process started (an xdist worker's controller)."""
        self.env = dict(os.environ)
        if path is not None:
            self.path = path
            _ping(path)
            return
        self.folder = tempfile.mkdtemp(prefix="tamesu-zygote-")
        self.path = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                                   f"import forked; del sys.path[0]; forked._zygote({self.path!r}, {lazy!r})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the tamesu test zygote did not start (its error is above)")
        atexit.register(self.close)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)

    def stands_in_for(self, env: dict[str, str]) -> bool:
        keys = {key for key in {*env, *self.env} if key.startswith(_STARTUP_KEYS)}
        differ = {key for key in keys if env.get(key) != self.env.get(key)}
        # a PYTHONPATH of the run's own where the zygote has none: the fork puts it on sys.path as Python would,
        # or execs a fresh interpreter where it cannot (`_put_on_path`); a plug-in's run took 1.5 s of CPU
        return not differ or (differ == {"PYTHONPATH"} and "PYTHONPATH" not in self.env)

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float, stdin: str | int | None,
            as_user: bool = False, script: str | None = None, module: str = "tamesu"
            ) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, *([script] if script else ["-m", module]), *args]
        deadline = time.monotonic() + timeout
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        request = {"args": args, "cwd": str(cwd), "env": env, "as_user": as_user, "module": module,
                   "nice": os.getpriority(os.PRIO_PROCESS, 0)}
        body = json.dumps({**request, "script": script} if script else request).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(self.path)
            given = _stdin(stdin)
            try:
                socket.send_fds(connection, [_HEADER.pack(len(body))], [given, out_write, err_write])
            finally:
                for fd in {given, out_write, err_write} - {0}:
                    os.close(fd)
            connection.sendall(body)
            replies = connection.makefile("r")
            pid = int(replies.readline())
            output = _read_both(out_read, err_read, deadline)
            if output is None:
                os.kill(pid, signal.SIGKILL)
                output = _read_both(out_read, err_read, None)
                assert output is not None
                raise subprocess.TimeoutExpired(command, timeout, _text(output[0]), _text(output[1]))
            connection.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                code = int(replies.readline())
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(command, timeout, _text(output[0]), _text(output[1])) from None
        return subprocess.CompletedProcess(command, code, _text(output[0]), _text(output[1]))


def _stdin(stdin: str | int | None) -> int:
    """The child's stdin as `subprocess.run` gives it: ours (None), /dev/null (DEVNULL) or a pipe with `input`."""
    if isinstance(stdin, str):
        read, write = os.pipe()

        def feed() -> None:
            with open(write, "w") as pipe, contextlib.suppress(BrokenPipeError):
                pipe.write(stdin)

        threading.Thread(target=feed, daemon=True).start()  # a pipe holds 64 KiB: the child reads the rest
        return read
    if stdin == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDONLY)
    try:
        os.fstat(0)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)
    return 0


def _read_both(out_fd: int, err_fd: int, deadline: float | None) -> tuple[bytes, bytes] | None:
    """Both pipes to their end, or None at the deadline (the pipes stay open to be read again)."""
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    selector = selectors.DefaultSelector()
    for fd in chunks:
        selector.register(fd, selectors.EVENT_READ)
    try:
        while selector.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            for key, _ in selector.select(left):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
    finally:
        selector.close()
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd])


def _text(data: bytes) -> str:
    """As `subprocess.run(text=True)` decodes: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


_zygote_here: _Zygote | None = None
_zygote_pid = 0
_zygote_lock = threading.Lock()
"""Runs started from two threads at once (a module fixture's two runs side by side) start one zygote."""


def _ping(path: str) -> None:
    """Wait until the warm process at `path` has imported: a lazy one imports at its first request, whose
    caller's own timeout (an MCP server's `connect_timeout`) would otherwise count seconds of imports."""
    body = json.dumps({"ping": True}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(120)
        connection.connect(path)
        connection.sendall(_HEADER.pack(len(body)) + body)
        if connection.makefile("r").readline().strip() != "ready":
            raise RuntimeError(f"the tamesu test zygote at {path} did not answer (its error is above)")


def _workers_zygote() -> _Zygote:
    """This worker's warm process: the one its xdist controller started for all its workers
    (`start_for_workers`), else its own, started on first use (under a lock: two threads of a test share one; a
    forked pytest process gets its own)."""
    global _zygote_here, _zygote_pid
    with _zygote_lock:
        if _zygote_here is None or _zygote_pid != os.getpid():
            shared = os.environ.get(SHARED) if os.environ.get("PYTEST_XDIST_WORKER") else None
            _zygote_here, _zygote_pid = _Zygote(path=shared) if shared else _Zygote(), os.getpid()
        return _zygote_here


SHARED = "TAMESU_TEST_ZYGOTE"
"""Where the warm process of an xdist run listens, for its workers (who inherit it from their controller)."""


def start_for_workers() -> None:
    """In an xdist controller, before it starts its workers: one warm process for all of them, a child of the
    controller, which ends it as it ends, so `time` counts its forks' CPU. A warm process per worker spent some
    4 s of CPU on the same imports in each; this one imports them when a test first asks."""
    global _zygote_here, _zygote_pid
    if os.environ.get("TAMESU_TEST_FORK", "1") == "0":
        return
    with _zygote_lock:
        _zygote_here, _zygote_pid = _Zygote(lazy=True), os.getpid()
    os.environ[SHARED] = _zygote_here.path


def run(args: list[str], cwd: Path, env: dict[str, str], timeout: float, stdin: str | int | None = None,
        as_user: bool = False, script: str | None = None, module: str = "tamesu") -> subprocess.CompletedProcess[str]:
    """`python -m tamesu ARGS` in `cwd` with exactly `env`, as `subprocess.run(capture_output=True, text=True)`
    with `stdin` None (ours), `subprocess.DEVNULL` or the text to send. `as_user`: file modes hold even for
    root (the capabilities that override them dropped; a plain child runs under setpriv). `script`: `python
    SCRIPT ARGS` instead, for a script that imports tamesu (a test's own launcher), forked from the same warm
    process; only where the environment is the zygote's to the last PYTHON variable (no PYTHONPATH is put on
    `sys.path` for a script). `module`: `python -m MODULE ARGS` (a nested pytest, whose 0.6 s of start-up
    imports of tamesu a fork skips)."""
    if os.environ.get("TAMESU_TEST_FORK", "1") != "0":
        zygote = _workers_zygote()
        same_path = script is None or env.get("PYTHONPATH") == zygote.env.get("PYTHONPATH")
        if zygote.stands_in_for(env) and same_path:
            return zygote.run(args, cwd, env, timeout, stdin, as_user, script, module)
    feed: dict[str, Any] = {"input": stdin} if isinstance(stdin, str) else {"stdin": stdin}
    drop = "-" + ",-".join(("dac_override", "dac_read_search"))
    prefix = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"] if as_user and os.geteuid() == 0 else []
    python = [sys.executable, *([script] if script else ["-m", module])]
    return subprocess.run([*prefix, *python, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, **feed)


_LAUNCHER = str(Path(__file__).resolve().parent / "warm_launch.py")


def tamesu_command() -> list[str]:
    """`python -m tamesu` as a command for a test to hand another program (a shell script's `tamesu`, a server
    started with Popen): a fork of this worker's warm process through the launcher of `script_command`, with its
    signals and exit code. A plain `python -m tamesu` when `TAMESU_TEST_FORK=0`."""
    if os.environ.get("TAMESU_TEST_FORK", "1") == "0":
        return [sys.executable, "-m", "tamesu"]
    zygote = _workers_zygote()
    return [sys.executable, "-I", "-S", _LAUNCHER, zygote.path, "-m", "tamesu"]


def script_command(script: str | os.PathLike[str], *args: str) -> list[str]:
    """`python SCRIPT ARGS` as a command to hand a target that starts it (an MCP server), run as a fork of the
    warm process (which has imported the MCP SDK's server side for them): a stdlib-only launcher (`warm_launch.py`,
    `python -I -S`, a few ms) passes its stdio, folder, environment and arguments to the fork, passes SIGTERM,
    SIGINT and SIGHUP on, exits with the fork's code, and takes the fork with it when it is killed. A plain
    `python SCRIPT` when `TAMESU_TEST_FORK=0`."""
    return [*script_python(), str(script), *args]


def script_python() -> list[str]:
    """What stands for `python` in `python SCRIPT ARGS` (`script_command`)."""
    if os.environ.get("TAMESU_TEST_FORK", "1") == "0":
        return [sys.executable]
    return [sys.executable, "-I", "-S", _LAUNCHER, _workers_zygote().path]
