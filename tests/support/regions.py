"""Regions on loopback for the region tests: each a PostgreSQL server of its own and
``tickwheel serve`` processes started with ``--region NAME`` and one shared directory.

:func:`start_regions` picks every node's port first (the directory names them all), then
starts the regions' databases and nodes; the processes join a :class:`ProcessGroup`,
so a failing test shows their logs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from scheduler.regions import Region, RegionDirectory
from tests.support.db import migrate_sync
from tests.support.processes import ProcessGroup, ServeProcess, process_group
from tests.support.servers import PostgresServer, free_port, start_server

DATABASE = "tickwheel"


@dataclasses.dataclass
class RegionStack:
    """One region: its PostgreSQL and its nodes."""

    name: str
    postgres: PostgresServer
    dsn: str
    """The application's DSN (row-level security applies)."""
    nodes: list[ServeProcess]

    @property
    def target(self) -> str:
        """The first node's ``host:port``."""
        return self.nodes[0].target

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Every node's ``host:port``, in directory order."""
        return tuple(n.target for n in self.nodes)

    @property
    def admin_dsn(self) -> str:
        """A superuser DSN of the region's database (reads every tenant's rows)."""
        return self.postgres.dsn(DATABASE)


@dataclasses.dataclass
class Regions:
    """Every region of a test, and the directory they share."""

    stacks: dict[str, RegionStack]
    directory: RegionDirectory
    group: ProcessGroup

    def __getitem__(self, name: str) -> RegionStack:
        return self.stacks[name]

    @property
    def inline(self) -> str:
        """The directory in its inline form (``--regions``)."""
        return ",".join(f"{r.name}={'|'.join(r.endpoints)}" for r in self.directory)


def _database(postgres: PostgresServer) -> str:
    postgres.ensure_app_role()
    postgres.psql(f"CREATE DATABASE {DATABASE} OWNER {postgres.app_user}")
    dsn = postgres.app_dsn(DATABASE)
    migrate_sync(dsn)
    return dsn


@contextlib.contextmanager
def start_regions(
    base_dir: Path,
    names: Sequence[str] = ("us", "eu"),
    *,
    nodes: int = 1,
    extra_args: Sequence[str] = (),
    postgres: Mapping[str, PostgresServer] | None = None,
) -> Iterator[Regions]:
    """Start each region in ``names`` (``nodes`` serve processes each, on a PostgreSQL
    server of its own unless ``postgres`` gives one) and yield them; everything is
    stopped at the end (the PostgreSQL servers this started are removed)."""
    ports = {name: [free_port() for _ in range(nodes)] for name in names}
    directory = RegionDirectory(
        {n: Region(n, tuple(f"127.0.0.1:{p}" for p in ports[n])) for n in names}
    )
    inline = ",".join(f"{r.name}={'|'.join(r.endpoints)}" for r in directory)
    started: list[PostgresServer] = []
    try:
        with process_group(base_dir / "procs") as group:
            stacks: dict[str, RegionStack] = {}
            for name in names:
                pg = (postgres or {}).get(name)
                if pg is None:
                    pg = start_server(lambda: PostgresServer(None))
                    started.append(pg)
                dsn = _database(pg)
                stack = RegionStack(name, pg, dsn, [])
                for i, port in enumerate(ports[name]):
                    node = ServeProcess(
                        group.dir / f"{name}-{i}",
                        dsn,
                        name=f"serve-{name}-{i}",
                        extra_args=(
                            "--region",
                            name,
                            "--regions",
                            inline,
                            "--node-id",
                            f"{name}-{i}",
                            "--canary-interval-s",
                            "0",
                            "--preload-interval-s",
                            "0.2",
                            *extra_args,
                        ),
                    )
                    node.port = port
                    group.procs.append(node)
                    node.start()
                    stack.nodes.append(node)
                stacks[name] = stack
            yield Regions(stacks, directory, group)
    finally:
        for pg in started:
            pg.cleanup()
