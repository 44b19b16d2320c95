"""``tickwheel workers``: the worker streams connected to a node (ListWorkers), as the
dashboard's workers table shows them."""

from __future__ import annotations

from typing import Any

import click

from scheduler.cli._options import api_key_option, client_options, json_option
from scheduler.cli._output import print_json, print_rows
from scheduler.cli._runner import run_coro, with_client


@click.command(name="workers")
@client_options
@api_key_option
@json_option
def workers(as_json: bool, **kw: Any) -> None:
    """The tenant's workers connected to the node at --target: slots used and free,
    the due tasks each could take there (waiting) and those a dispatch pause holds
    (paused). Each node knows its own streams: in a cluster, ask each node."""
    rows = run_coro(with_client(kw, lambda c: c.list_workers()))
    if as_json:
        print_json(rows)
        return
    print_rows(
        ("worker", "types", "pools", "slots", "used", "free", "waiting", "paused", "last seen"),
        [
            (
                w.worker_id,
                ",".join(w.task_types) or "any",
                ",".join(p.value for p in w.pools) or "any",
                str(w.slots),
                str(w.slots_used),
                str(w.slots_free),
                str(w.waiting),
                str(w.paused),
                w.last_seen.isoformat(timespec="seconds"),
            )
            for w in rows
        ],
    )
