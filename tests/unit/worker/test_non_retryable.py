"""Which raised exceptions the worker SDK reports as not retryable."""

from __future__ import annotations

from scheduler.worker._runner import _listed


class Declined(ValueError):
    pass


def test_classes_match_subclasses_and_names_match_the_mro() -> None:
    assert _listed(Declined("x"), (ValueError,))
    assert _listed(Declined("x"), ("Declined",))
    assert _listed(Declined("x"), ("ValueError",))
    assert not _listed(KeyError("x"), (ValueError, "Declined"))
    assert not _listed(ValueError("x"), ())
