"""The ``tickwheel`` command line (the only place that reads flags and env vars)."""

from scheduler.cli._main import main
from scheduler.cli._orchestration import expectations, schedules, workflows

for _group in (workflows, schedules, expectations):
    main.add_command(_group)

__all__ = ["main"]
