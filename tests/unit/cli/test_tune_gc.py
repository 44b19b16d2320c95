"""The service commands tune the garbage collector for their batch-heavy hot paths."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from scheduler.cli._runner import tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_startup_objects_are_frozen_and_young_collections_wait_for_50k() -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    tune_gc()
    assert gc.get_freeze_count() > 1_000  # every module and class alive at start-up
    assert gc.get_threshold() == (50_000, 20, 20)
