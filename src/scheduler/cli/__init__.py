"""The ``tickwheel`` command line (the only place that reads flags and env vars)."""

from scheduler.cli._main import main

__all__ = ["main"]
