from collections.abc import Callable, Sequence
from typing import Any

from scheduler.types import Assignment

KINDS: dict[int, str]

def decode_writes(data: bytes) -> tuple[int, str, list[Any], list[bytes]] | None: ...
def encode_assignments(
    assignments: Sequence[Assignment], one: Callable[[Assignment], bytes], now_us: int = 0
) -> bytes: ...
