"""Bounded label values: the first N distinct values keep their name, later ones are
``other``. Sticky, so a counter under a given label never goes down."""

from __future__ import annotations

OTHER = "other"


class BoundedLabel:
    """Maps raw values (task types, tenant ids) to at most ``limit`` label values."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._named: set[str] = set()

    def __call__(self, value: str) -> str:
        """The label value for ``value``."""
        if value in self._named:
            return value
        if len(self._named) < self.limit:
            self._named.add(value)
            return value
        return OTHER
