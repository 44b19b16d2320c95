from collections.abc import Callable

from scheduler.client._types import Task

def decode_submit_answer(
    data: bytes, rest: Callable[[list[bytes]], list[Task]]
) -> list[Task] | None: ...
