"""SQL text: named sections in ``.sql`` files, loaded with :mod:`importlib.resources`.

A file is split on header lines ``-- name: <query_name>``. Before use every section is
expanded against the state machine (:mod:`scheduler.states`), so the SQL guards cannot
drift from the code:

- ``{{from:A,B|to:C}}`` -> ``'A', 'B'`` after checking that A -> C and B -> C are legal;
  ``{{from:A|to:C,D}}`` for a statement that moves to either (A -> C and A -> D).
- ``{{sources:C}}`` -> every legal source of C.
- ``{{states:A,B}}`` -> ``'A', 'B'`` (a plain state list, e.g. heartbeat's guard).
- ``{{paths}}`` -> a ``VALUES`` relation ``p(start, finish, f, t)`` listing, for each
  multi-step move a statement makes (e.g. RUNNING -> DEAD_LETTER goes through RETRYING),
  every legal step, for the audit insert.
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import re

from scheduler.states import TaskState, check_transition, sources

S = TaskState

ROUTES: tuple[tuple[TaskState, ...], ...] = (
    (S.SCHEDULED, S.PRELOADED),
    (S.RETRYING, S.PRELOADED),
    (S.PRELOADED, S.DISPATCHED),
    (S.DISPATCHED, S.RUNNING),
    (S.DISPATCHED, S.PRELOADED),
    (S.DISPATCHED, S.PRELOADED, S.CANCELLED),
    (S.RUNNING, S.COMPLETED),
    (S.DISPATCHED, S.RUNNING, S.COMPLETED),
    (S.RUNNING, S.RETRYING),
    (S.RUNNING, S.RETRYING, S.DEAD_LETTER),
    (S.RUNNING, S.PRELOADED),
    (S.RUNNING, S.CANCELLED),
    (S.SCHEDULED, S.CANCELLED),
    (S.PRELOADED, S.CANCELLED),
    (S.RETRYING, S.CANCELLED),
    (S.RETRYING, S.DEAD_LETTER),
    (S.DEAD_LETTER, S.SCHEDULED),
)
"""Every (start -> finish) move a store statement makes, step by step. A statement may
make a multi-step move in one go (a failure with no attempts left is RUNNING ->
RETRYING -> DEAD_LETTER); the audit table gets one row per step."""


def route_steps() -> list[tuple[TaskState, TaskState, TaskState, TaskState]]:
    """(start, finish, from, to) for each step of each route; checked against the table."""
    starts_finishes: set[tuple[TaskState, TaskState]] = set()
    out = []
    for route in ROUTES:
        key = (route[0], route[-1])
        if key in starts_finishes:
            raise ValueError(f"two routes for {key}")
        starts_finishes.add(key)
        for a, b in itertools.pairwise(route):
            check_transition("<route>", a, b)
            out.append((route[0], route[-1], a, b))
    return out


def _quote(states: list[TaskState]) -> str:
    return ", ".join(f"'{s.value}'" for s in states)


def _expand_guard(match: re.Match[str]) -> str:
    body = match.group(1)
    kind, _, rest = body.partition(":")
    if kind == "from":
        froms, _, to = rest.partition("|to:")
        states = [TaskState(f) for f in froms.split(",")]
        for target in (TaskState(t) for t in to.split(",")):
            for st in states:
                check_transition("<sql>", st, target)
        return _quote(states)
    if kind == "sources":
        return _quote(list(sources(TaskState(rest))))
    if kind == "states":
        return _quote([TaskState(s) for s in rest.split(",")])
    if kind == "paths":
        rows = ", ".join(
            f"('{a.value}', '{b.value}', '{f.value}', '{t.value}')" for a, b, f, t in route_steps()
        )
        return f"(VALUES {rows}) AS p(start, finish, f, t)"
    raise ValueError(f"unknown SQL template {{{{{body}}}}}")


_TEMPLATE = re.compile(r"\{\{([a-z]+(?::[^}]*)?)\}\}")
_HEADER = re.compile(r"^-- name: ([a-z_0-9]+)\s*$", re.MULTILINE)


def expand(sql: str) -> str:
    """Expand the state-machine templates in ``sql``."""
    return _TEMPLATE.sub(_expand_guard, sql)


def read_text(*parts: str) -> str:
    """A file under ``scheduler/store/sql``."""
    res = importlib.resources.files("scheduler.store").joinpath("sql", *parts)
    return res.read_text(encoding="utf-8")


def parse_sections(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` sections into {name: sql}."""
    found = list(_HEADER.finditer(text))
    out: dict[str, str] = {}
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        name = m.group(1)
        if name in out:
            raise ValueError(f"duplicate query section {name}")
        out[name] = expand(text[m.end() : end].strip())
    return out


@functools.cache
def queries(dialect: str) -> dict[str, str]:
    """Every named query of ``dialect`` ('postgres' or 'sqlite'), templates expanded."""
    return parse_sections(read_text(dialect, "queries.sql"))


@functools.cache
def all_queries(dialect: str) -> dict[str, str]:
    """``queries.sql`` and ``orchestration.sql`` of ``dialect`` in one map, expanded (a
    name may appear in only one of them)."""
    out = dict(queries(dialect))
    for name, sql in parse_sections(read_text(dialect, "orchestration.sql")).items():
        if name in out:
            raise ValueError(f"duplicate query section {name}")
        out[name] = sql
    return out


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every PostgreSQL migration, in order."""
    root = importlib.resources.files("scheduler.store").joinpath("sql", "postgres", "migrations")
    out = []
    for entry in root.iterdir():
        m = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    out.sort()
    versions = [v for v, _, _ in out]
    # Gaps are allowed (numbers are handed out to parallel branches ahead of time);
    # a number used twice is not: the runner records versions, not names.
    if len(set(versions)) != len(versions) or (versions and versions[0] < 1):
        raise ValueError(f"migration numbers must be unique and >= 1, got {versions}")
    return out
