"""Browser sessions of the dashboard, kept in memory only.

Owns :class:`Sessions`: an opaque random id (the cookie, HttpOnly and SameSite=Strict)
maps to the credentials the browser acts with, its CSRF token, the messages to show on
the next page, and the bulk plans it was shown. Credentials never reach the browser.
Only logged-in browsers have a stored session; bounded per credentials and in all
without a request of another browser ever pushing one out (:class:`Sessions`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from scheduler.ui._api import Credentials

COOKIE = "tickwheel_session"
PRE_LOGIN_COOKIE = "tickwheel_login"
"""A random value a browser holds before it logs in (its login form's CSRF token is
derived from it); nothing of it is kept on the server."""
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
    key_can_write: bool | None = None
    """Whether the API key has the ``submit`` scope (None: not asked yet; asked once)."""

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


class SessionsFull(Exception):
    """Every session slot holds a logged-in browser that is still in use."""


class Sessions:
    """Every logged-in session by id.

    Only a login stores a session: a browser that has not logged in gets a transient
    one (:meth:`anonymous`), so requests without a cookie cannot fill the table and push
    a logged-in user out. Bounded twice: ``max_per_creds`` sessions per set of
    credentials (a further login of the same credentials drops their least recently used
    session, never another user's), and ``max_sessions`` in all (idle ones are dropped
    first; when every slot is live, a new login is refused with :class:`SessionsFull`).
    """

    def __init__(
        self,
        *,
        max_sessions: int = 10_000,
        max_per_creds: int = 100,
        idle_s: float = 12 * 3600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max = max_sessions
        self._max_per_creds = max_per_creds
        self._idle_s = idle_s
        self._clock = clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()
        self._csrf_key = secrets.token_bytes(32)

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

    def anonymous(self, nonce: str) -> Session:
        """A session for a browser that has not logged in, never stored: no credentials,
        and a CSRF token derived from ``nonce`` (a random value in the browser's
        pre-login cookie), so the login form is CSRF-checked without server state."""
        csrf = hmac.new(self._csrf_key, nonce.encode(), hashlib.sha256).hexdigest()
        return Session(id="", creds=Credentials(), csrf=csrf, last_used=self._clock())

    def new(self, creds: Credentials) -> Session:
        """A logged-in session acting with ``creds`` (SessionsFull when every slot is a
        live session)."""
        now = self._clock()
        same = [s for s in self._by_id.values() if s.creds == creds]
        if len(same) >= self._max_per_creds:
            del self._by_id[same[0].id]  # least recently used first
        if len(self._by_id) >= self._max:
            for sid in [s.id for s in self._by_id.values() if now - s.last_used > self._idle_s]:
                del self._by_id[sid]
        if len(self._by_id) >= self._max:
            raise SessionsFull(f"{self._max} browsers are logged in; try again later")
        session = Session(
            id=secrets.token_urlsafe(32),
            creds=creds,
            csrf=secrets.token_urlsafe(32),
            logged_in=True,
            last_used=now,
        )
        self._by_id[session.id] = session
        return session

    def drop(self, session_id: str) -> None:
        self._by_id.pop(session_id, None)
