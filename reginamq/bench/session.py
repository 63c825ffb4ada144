"""One invocation of ``reginamq bench``: set up the target (an own broker or ``--url``), run,
print and write the report, optionally measure the ceiling, and tear down what was started.

Returns a process exit code: 0 when the run completed (errors and shed are reported, not
fatal: they are measurements).
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import tempfile
from functools import partial
from pathlib import Path

from reginamq.bench import report, system
from reginamq.bench.broker import OwnBroker, embedded_url
from reginamq.bench.ceiling import ceiling_lines, run_ceiling
from reginamq.bench.config import BenchConfig
from reginamq.bench.display import Display
from reginamq.bench.runner import Target, run
from reginamq.bench.verify import Verifier, result_lines
from reginamq.store.embedded import EmbeddedPostgres
from reginamq.store.schema import apply_schema


def _raise_open_files_limit() -> None:
    """Every consumer's long poll holds a socket, on our side and on the own broker's: a
    thousand of them would run past the usual soft limit of 1,024 descriptors. The limit is
    inherited by the processes started after this (the own broker, producers, consumers)."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = 65_536 if hard == resource.RLIM_INFINITY else hard
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _postgres_finder(database_url: str | None, data_dir: Path | None):
    """Our embedded server's processes when we know its folder, else every postgres process."""
    if data_dir is not None:
        return system.postgres_of(str(data_dir)), f"postgres processes of {data_dir}"
    return system.all_postgres, "all postgres processes on this machine"


async def run_session(cfg: BenchConfig, *, url: str | None, workers: int, database_url: str | None,
                      data_dir: Path | None, json_path: Path | None, plot_path: Path | None,
                      with_ceiling: bool = False, live: bool | None = None, serve_args: tuple[str, ...] = ()) -> int:
    _raise_open_files_limit()
    broker = server = folder = None
    if cfg.transport != "http":
        if url is not None:
            raise ValueError(f"--transport {cfg.transport} calls the broker in the bench's processes, not at --url")
        if database_url is None and cfg.transport == "library":
            folder = None if data_dir is not None else Path(tempfile.mkdtemp(prefix="reginamq-bench-"))
            server = EmbeddedPostgres((data_dir or folder / "pgdata").expanduser().resolve())
            print(f"starting an embedded PostgreSQL in {server.data_dir}", flush=True)
            database_url = server.claim()
            await apply_schema(database_url)
        pg_finder, pg_scope = _postgres_finder(None, server.data_dir if server else None)
        placement = "each producer and consumer process" if cfg.library_processes else "one process"
        description = (f"the library in {placement} on " + ("an embedded PostgreSQL" if server else "--database-url")
                       if cfg.transport == "library" else "nothing (--transport null: the generator's own cost)")
        broker_finder = None
        broker_scope = "broker = in the generator's processes (gen)"
    elif url is None:
        broker = OwnBroker(workers=workers, data_dir=data_dir, serve_args=serve_args)
        flags = " ".join(("--workers", str(workers), *serve_args))
        print(f"starting an own broker: reginamq serve {flags} on {broker.url}, "
              f"embedded PostgreSQL in {broker.data_dir} (log {broker.log_path})", flush=True)
        broker.start()
        url = broker.url
        database_url = broker.database_url
        pg_finder, pg_scope = _postgres_finder(None, broker.data_dir)
        broker_pid = broker.process.pid
        description = f"own broker {url} (--workers {workers}), embedded PostgreSQL {broker.data_dir}"
        broker_scope = "broker = the reginamq serve process tree"
    else:
        url = url.rstrip("/")
        pg_finder, pg_scope = _postgres_finder(database_url, None)
        broker_pid = system.listening_broker(url)
        description = f"existing broker {url}" + ("" if database_url else " (no --database-url: db size n/a)")
        broker_scope = (f"broker = process tree of pid {broker_pid} (listening on the port)" if broker_pid
                        else "broker = n/a (not a local process)")
    if cfg.transport == "http":
        broker_finder = (partial(system.broker_tree, broker_pid)) if broker_pid else None
    try:
        target = Target(url=url, database_url=database_url, broker_finder=broker_finder, postgres_finder=pg_finder,
                        description=description, cpu_scope=f"{broker_scope}; pg = {pg_scope}; "
                                                           f"gen = this bench process tree")
        header = report.header(cfg, target.description, target.cpu_scope)
        with Display(cfg.duration + cfg.drain, live=live) as display:
            for text in header:
                display.print(text)
            if (configure := report.configure_line(cfg)) is not None:
                display.print(configure)
            rows, final = await run(cfg, target, display)
            display.print(report.final_line(final))
            for text in report.summary_lines(final):
                display.print(text)
            if "verify" in final:
                for text in result_lines(final["verify"])[:-1]:
                    display.print(text)
        extra = {}
        if with_ceiling:
            if database_url is None:
                print("--ceiling needs the broker's database: give --database-url with --url")
            else:
                with Display(cfg.duration, live=live) as display:
                    result = await run_ceiling(cfg, database_url, pg_finder, "the broker's PostgreSQL", display)
                    for text in ceiling_lines(result, final["in_rate"]):
                        display.print(text)
                extra["ceiling"] = result
        if json_path is not None:
            report.write_json(json_path, cfg, header, rows, final, extra)
            print(f"wrote {json_path}")
        if plot_path is not None:
            report.write_plot(plot_path, cfg, rows)
            print(f"wrote {plot_path}")
        if "verify" in final:
            print(result_lines(final["verify"])[-1], flush=True)  # the counters, as the very last line
            return 1 if Verifier.failed(final["verify"]) else 0
        return 0
    finally:
        if broker is not None:
            broker.stop()
        if server is not None:
            server.release()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


async def run_ceiling_session(cfg: BenchConfig, *, database_url: str | None, data_dir: Path | None,
                              broker_rate: float | None, live: bool | None = None) -> int:
    server = folder = None
    if database_url is None:
        folder = None if data_dir is not None else Path(tempfile.mkdtemp(prefix="reginamq-ceiling-"))
        pgdata = (data_dir or folder / "pgdata").expanduser().resolve()
        server = EmbeddedPostgres(pgdata)
        database_url = server.start()
        assert database_url == embedded_url(pgdata)
        pg_finder, scope = _postgres_finder(None, pgdata)
        description = f"embedded PostgreSQL {pgdata}"
    else:
        pg_finder, scope = _postgres_finder(database_url, None)
        description = "PostgreSQL at --database-url"
    try:
        with Display(cfg.duration, live=live) as display:
            display.print(f"  cpu: pg = {scope}")
            result = await run_ceiling(cfg, database_url, pg_finder, description, display)
            for text in ceiling_lines(result, broker_rate):
                display.print(text)
        return 0
    finally:
        if server is not None:
            server.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
