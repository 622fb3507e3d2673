"""`tamesu store ...` and `tamesu view`: the commands over the results store (loaded only when used)."""

from __future__ import annotations

import errno
import ipaddress
import sys
from pathlib import Path
from typing import Any

import click

from tamesu.cli.shared import CONFIG_HELP, CONFIG_PATH
from tamesu.errors import EXIT_CONFIG, EXIT_INFRA, ConfigError

VIEW_PORT = 8765
def _project(config: str | None) -> Any:
    from tamesu.plan import find_project, load_project

    path = Path(config) if config else find_project(Path.cwd())
    try:
        return load_project(path, Path.cwd())
    except ConfigError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        sys.exit(EXIT_CONFIG)


def open_store(url_option: str | None, config: str | None, *, existing: bool = False) -> Any:
    """--store, else TAMESU_STORE, else tamesu.yaml's store:, else the project's SQLite file; migrated. `existing`:
    a SQLite file that is not there is said and no store is made (a reader's mistyped path made an empty one)."""
    from tamesu.store import StoreError, store_url

    project = _project(config)
    off = False
    try:
        if url_option:
            url = store_url(url_option, project.dir, environ={})
        else:
            url = store_url(project.spec.store, project.dir)
            off = url is None  # runs write none; one written before, or imported, is still read
            url = url or store_url(True, project.dir, environ={})
    except StoreError as exc:
        click.echo(f"--{exc}" if url_option else str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    if url is None:
        click.echo("no store: --store is off", err=True)
        sys.exit(EXIT_CONFIG)
    file = _sqlite_file(url) if existing else None
    if file is not None and not file.exists():
        why = "the store is off (store: false in tamesu.yaml or TAMESU_STORE=off), so no run writes one" if off \
            else "no run has written one there"
        click.echo(f"no store at {file}: {why} (a run with the store on makes it; "
                   "`tamesu store import RUN_DIR` fills it in)", err=True)
        sys.exit(EXIT_CONFIG)
    try:
        from tamesu.store.db import Store

        store = Store(url)
    except StoreError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    try:
        store.migrate()
    except Exception as exc:
        from tamesu.store import StoreLocked
        from tamesu.store.writer import _short

        # a SQLite file another writer kept locked past the wait: its own line names the file and the wait
        click.echo(str(exc) if isinstance(exc, StoreLocked) else f"store: cannot open {store.shown}: {_short(exc)}",
                   err=True)
        sys.exit(EXIT_INFRA)
    return store, project


def _sqlite_file(url: str) -> Path | None:
    """The file of a `sqlite:///PATH` store; None for another database or SQLite in memory."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # what the store itself would refuse: Store() says it
        return None
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


_STORE_OPTION = click.option("--store", "store_url_option", metavar="URL",
                             help="The store (default: TAMESU_STORE, tamesu.yaml's store:, .tamesu/store.db).")
_CONFIG_OPTION = click.option("--config", type=CONFIG_PATH, help=CONFIG_HELP)


@click.group(name="store")
def store_group() -> None:
    """The results store: import run folders, bring its schema up to date."""


@store_group.command(name="import")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@_STORE_OPTION
@_CONFIG_OPTION
def import_command(dirs: tuple[str, ...], store_url_option: str | None, config: str | None) -> None:
    """Write run folders into the store (a folder of runs imports each); importing again replaces."""
    from tamesu.report.load import RunDirError, run_dirs_in
    from tamesu.store import StoreError
    from tamesu.store.importer import import_run

    store, _ = open_store(store_url_option, config)
    try:
        folders = run_dirs_in(dirs)
    except RunDirError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_CONFIG)
    try:
        for folder in folders:
            try:
                run_id, tests, problems = import_run(store, folder)
            except RunDirError as exc:
                click.echo(str(exc), err=True)
                sys.exit(EXIT_CONFIG)
            except StoreError as exc:  # a SQLite store another writer kept locked past the wait
                click.echo(f"{exc}; {folder} is not imported", err=True)
                sys.exit(EXIT_INFRA)
            click.echo(f"imported {folder}: {tests} test(s) as run {run_id}")
            for problem in problems:
                click.echo(f"warning: {problem}", err=True)
    finally:
        store.close()


@store_group.command(name="migrate")
@_STORE_OPTION
@_CONFIG_OPTION
def migrate_command(store_url_option: str | None, config: str | None) -> None:
    """Create the store's tables, or bring them to the newest revision."""
    store, _ = open_store(store_url_option, config)
    click.echo(f"{store.shown}: at revision {store.revision()}")
    store.close()


@click.command(name="view")
@_STORE_OPTION
@_CONFIG_OPTION
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help=f"The port (0: any free one). Default {VIEW_PORT}, or a free one when {VIEW_PORT} is taken.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; 0.0.0.0 lets other machines in (the history has no sign-in).")
@click.option("--no-open", is_flag=True, help="Do not open a browser.")
def view_command(store_url_option: str | None, config: str | None, port: int | None, host: str,
                 no_open: bool) -> None:
    """Serve the run history: runs, flaky tests, a test's history, comparisons, judge drift."""
    import asyncio

    from tamesu.net.serve import LoopServer
    from tamesu.view.app import create_app

    store, project = open_store(store_url_option, config, existing=True)
    app = create_app(store, project.spec.trace_url)

    def listening() -> LoopServer:
        try:
            return LoopServer(app, host=host, port=VIEW_PORT if port is None else port)
        except OSError as exc:
            if port is None and exc.errno == errno.EADDRINUSE:
                # another server (an example agent, a second view): a port not asked for is not worth failing
                click.echo(f"view: {host}:{VIEW_PORT} is in use: serving on a free port; --port chooses one",
                           err=True)
                return listening_on_any()
            click.echo(f"view: cannot listen on {host}:{VIEW_PORT if port is None else port}: "
                       f"{exc.strerror or exc}", err=True)
            sys.exit(EXIT_INFRA)

    def listening_on_any() -> LoopServer:
        try:
            return LoopServer(app, host=host, port=0)
        except OSError as exc:
            click.echo(f"view: cannot listen on {host}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_INFRA)

    async def serve() -> None:
        server = listening()
        await server.start()
        local = server.url  # a view on every interface is opened at this machine's loopback (reachable_host)
        if not ipaddress.ip_address(server.host).is_loopback:
            click.echo(f"view: listening on {server.host}:{server.port}: anyone who can reach this machine can read "
                       "the run history (secrets are masked in it; there is no sign-in)", err=True)
        click.echo(f"tamesu view: {local}/ (store {store.shown}); Ctrl-C stops it", err=False)
        if not no_open:
            import webbrowser

            webbrowser.open(local + "/")
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
