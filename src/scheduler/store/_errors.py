"""The store's own refinement of :class:`~scheduler._errors.StoreError`.

Kept here, not in ``scheduler._errors``: it is how the engine tells an absent store
from a refused call, and on the wire it travels as its base, ``STORE_ERROR`` (the
vocabulary every client knows; proto/tickwheel/v1/tickwheel.proto).
"""

from __future__ import annotations

from scheduler._errors import StoreError


class StoreUnavailable(StoreError):
    """The store could not be reached, or went away during the call: refused or lost
    connections, a server shutting down, recovering or read-only (a demoted primary),
    a call past its timeout. The same call may succeed once the store is back; the
    engine holds its writes and retries them (travels on the wire as StoreError)."""
