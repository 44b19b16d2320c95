"""Browser sessions of the dashboard, kept in memory only.

Owns :class:`Sessions`: an opaque random id (the cookie, HttpOnly and SameSite=Strict)
maps to the credentials the browser acts with, its CSRF token, the messages to show on
the next page, and the bulk plans it was shown. Credentials never reach the browser.
Bounded: the least recently used session goes first past ``max_sessions``, and a
session unused for ``idle_s`` is dropped.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from scheduler.ui._api import Credentials

COOKIE = "tickwheel_session"
MAX_PLANS = 50
"""Bulk plans remembered per session (the oldest is forgotten first)."""


@dataclasses.dataclass(slots=True)
class Session:
    """One browser: who it acts as, its CSRF token, its pending messages and plans."""

    id: str
    creds: Credentials
    csrf: str
    logged_in: bool = False
    last_used: float = 0.0
    messages: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    plans: OrderedDict[str, dict[str, Any]] = dataclasses.field(default_factory=OrderedDict)

    def flash(self, kind: str, text: str) -> None:
        """A message for the next page (kind: ``info`` or ``error``)."""
        self.messages.append((kind, text))
        del self.messages[:-10]

    def take_messages(self) -> list[tuple[str, str]]:
        out, self.messages = self.messages, []
        return out

    def remember_plan(self, plan: dict[str, Any]) -> str:
        """Keep a plan the browser was shown; answer the id of its confirm page."""
        key = secrets.token_urlsafe(12)
        self.plans[key] = plan
        while len(self.plans) > MAX_PLANS:
            self.plans.popitem(last=False)
        return key

    def csrf_ok(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf, token or "")


class Sessions:
    """Every live session by id."""

    def __init__(
        self,
        default: Credentials,
        *,
        max_sessions: int = 10_000,
        idle_s: float = 12 * 3600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.default = default
        self._max = max_sessions
        self._idle_s = idle_s
        self._clock = clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (and mark it used), or None."""
        if not session_id:
            return None
        session = self._by_id.get(session_id)
        now = self._clock()
        if session is None:
            return None
        if now - session.last_used > self._idle_s:
            del self._by_id[session_id]
            return None
        session.last_used = now
        self._by_id.move_to_end(session_id)
        return session

    def new(self, creds: Credentials | None = None, *, logged_in: bool = False) -> Session:
        """A fresh session acting with ``creds`` (the start-up default when None)."""
        session = Session(
            id=secrets.token_urlsafe(32),
            creds=self.default if creds is None else creds,
            csrf=secrets.token_urlsafe(32),
            logged_in=logged_in,
            last_used=self._clock(),
        )
        self._by_id[session.id] = session
        while len(self._by_id) > self._max:
            self._by_id.popitem(last=False)
        return session

    def drop(self, session_id: str) -> None:
        self._by_id.pop(session_id, None)
