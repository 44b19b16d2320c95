"""An SQLite file made before a column existed gets it when opened."""

from __future__ import annotations

from pathlib import Path

from scheduler.store.sqlite._db import connect


def test_an_older_file_gets_the_retry_policy_column(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    conn = connect(path)
    conn.execute("ALTER TABLE tasks DROP COLUMN retry_policy")  # as an older version made it
    conn.close()
    conn = connect(path)
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(tasks)")}
        assert "retry_policy" in columns
    finally:
        conn.close()
    conn = connect(path)  # and opening it again changes nothing
    conn.close()
