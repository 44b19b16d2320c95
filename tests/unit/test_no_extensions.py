"""``TICKWHEEL_NO_EXTENSIONS=1`` turns every native wire reader and writer off: each
says so (its ``*_DECODER`` is ``python``, its error names the switch), and its entry
point answers the general path's way (None: "decode it the general way", or the
general path's own result)."""

from __future__ import annotations

import subprocess
import sys

import pytest

READERS = {
    # module: (the switch's prefix, its entry point called, what that gives without
    # the extension)
    "scheduler.server._stream_wire": (
        "STREAM",
        "type(w.decode_worker_message(b'')).__name__",
        "WorkerMessage",  # the generated class, not the reader's Writes
    ),
    "scheduler.server._submit_wire": ("SUBMIT", "w.read_submit(b'', 1, None)", "None"),
    "scheduler.client._submit_wire": ("ANSWER", "w.decode_submit_answer(b'')", "[]"),
    "scheduler.worker._pushed": ("PUSHED", "w.read_pushed(b'\\x12\\x00')", "None"),
}


@pytest.mark.parametrize("module", sorted(READERS))
def test_no_extensions_reads_everything_the_general_way(module: str) -> None:
    prefix, call, gives = READERS[module]
    code = (
        f"import {module} as w; "
        f"print(w.{prefix}_DECODER, w.{prefix}_DECODER_ERROR, {call}, sep='|')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"TICKWHEEL_NO_EXTENSIONS": "1", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip().split("|") == ["python", "disabled by TICKWHEEL_NO_EXTENSIONS", gives]
