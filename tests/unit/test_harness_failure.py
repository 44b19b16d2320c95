"""A server that cannot start fails loudly with its log, never skips."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.support.servers import ServerProcess, ServerStartError, start_server


class _Broken(ServerProcess):
    name = "broken"

    def command(self) -> Sequence[str]:
        return ["/bin/sh", "-c", "echo 'fatal: cannot bind, config invalid' >&2; exit 3"]


def test_start_failure_carries_log_tail() -> None:
    with pytest.raises(ServerStartError, match="cannot bind, config invalid"):
        start_server(_Broken)
