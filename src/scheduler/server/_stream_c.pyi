from typing import Any

KINDS: dict[int, str]

def decode_writes(data: bytes) -> tuple[int, str, list[Any], list[bytes]] | None: ...
