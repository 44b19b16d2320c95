"""Fixtures shared by the integration tests: the one ``store`` fixture (every backend)
and the config it opens with, from ``tests/support/stores.py``."""

from __future__ import annotations

from tests.support.stores import store, store_config

__all__ = ["store", "store_config"]
