"""The web dashboard (``tickwheel ui``, and ``tickwheel dev`` on its own port).

Server-rendered pages (aiohttp, jinja2 templates with autoescape) over the public gRPC
API only: overview, tasks and their timelines, cancel and redrive (one task or in bulk,
planned first), schedules, workflows, expectations and the forecast. Charts use uPlot,
vendored in ``static/vendor/uplot``. Never imports the engine, the store or the server.
"""

from scheduler.ui._api import Credentials
from scheduler.ui._app import RunningUI, UIConfig, create_app, start_ui

__all__ = ["Credentials", "RunningUI", "UIConfig", "create_app", "start_ui"]
