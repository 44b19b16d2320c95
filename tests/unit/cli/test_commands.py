"""The ``tickwheel`` command tree is pinned: splitting the CLI into modules kept it."""

from __future__ import annotations

import importlib.metadata

import click

import scheduler.cli
from scheduler.cli import main


def test_every_command_is_registered() -> None:
    assert sorted(main.commands) == [
        "bulk-cancel",
        "bulk-redrive",
        "cancel",
        "concurrency",
        "dev",
        "dr",
        "expectations",
        "get",
        "history",
        "keys",
        "list",
        "migrate",
        "pause",
        "pauses",
        "rate-limits",
        "redrive",
        "resume",
        "schedules",
        "serve",
        "submit",
        "tenants",
        "ui",
        "watchdog",
        "worker",
        "workers",
        "workflows",
    ]
    groups = {n: c for n, c in main.commands.items() if isinstance(c, click.Group)}
    assert {n: sorted(g.commands) for n, g in groups.items()} == {
        "dr": ["promote", "status", "watch"],
        "expectations": ["delete", "list", "register"],
        "concurrency": ["set", "show"],
        "keys": ["create", "list", "revoke", "rotate"],
        "rate-limits": ["delete", "list", "set"],
        "schedules": ["create", "delete", "get", "list", "pause", "resume"],
        "tenants": ["create", "get", "list", "move", "update"],
        "workflows": ["cancel", "get", "list", "submit"],
    }


def test_the_entry_point_is_the_group() -> None:
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "tickwheel"
    ]
    assert entry.value == "scheduler.cli:main"
    assert entry.load() is scheduler.cli.main


def test_serve_and_dev_offer_to_share_the_port_only_when_asked() -> None:
    for name in ("serve", "dev"):
        (reuse,) = [p for p in main.commands[name].params if p.name == "reuse_port"]
        assert isinstance(reuse, click.Option)
        assert reuse.is_flag
        command = main.commands[name]
        assert command.make_context(name, []).params["reuse_port"] is False
        assert command.make_context(name, ["--reuse-port"]).params["reuse_port"] is True
