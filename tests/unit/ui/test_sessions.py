"""The dashboard's sessions map: only logins are stored, bounded per credentials and in
all, and no request of another browser ever pushes a logged-in user out (issue 36)."""

from __future__ import annotations

import pytest

from scheduler.ui._api import Credentials
from scheduler.ui._sessions import Sessions, SessionsFull

ALICE = Credentials(api_key="alice")
BOB = Credentials(api_key="bob")


def test_a_browser_that_has_not_logged_in_is_never_stored() -> None:
    sessions = Sessions(max_sessions=3)
    user = sessions.new(ALICE)
    # The flood of issue 36: far more cookie-less requests than the table holds.
    for i in range(10_002):
        anonymous = sessions.anonymous(f"nonce-{i}")
        assert anonymous.creds.empty
        assert not anonymous.logged_in
    assert len(sessions) == 1
    assert sessions.get(user.id) is user
    assert user.logged_in
    assert user.creds == ALICE


def test_the_anonymous_csrf_token_is_bound_to_the_browsers_nonce() -> None:
    sessions = Sessions()
    one = sessions.anonymous("n" * 43)
    assert one.csrf_ok(sessions.anonymous("n" * 43).csrf)
    assert not one.csrf_ok(sessions.anonymous("m" * 43).csrf)
    assert not one.csrf_ok(Sessions().anonymous("n" * 43).csrf)  # another dashboard's key


def test_logins_of_one_credentials_drop_only_their_own_oldest_session() -> None:
    sessions = Sessions(max_sessions=10, max_per_creds=2)
    bob = sessions.new(BOB)
    first, second, third = (sessions.new(ALICE) for _ in range(3))
    assert sessions.get(first.id) is None
    assert sessions.get(second.id) is second
    assert sessions.get(third.id) is third
    assert sessions.get(bob.id) is bob


def test_a_full_table_drops_idle_sessions_then_refuses_new_logins() -> None:
    now = [0.0]
    sessions = Sessions(max_sessions=2, idle_s=10, clock=lambda: now[0])
    old = sessions.new(ALICE)
    now[0] = 5
    live = sessions.new(BOB)
    with pytest.raises(SessionsFull):
        sessions.new(Credentials(api_key="carol"))
    assert sessions.get(old.id) is old
    assert sessions.get(live.id) is live
    now[0] = 16  # both idle > 10 s since last use (old used at 5, live at 5)
    carol = sessions.new(Credentials(api_key="carol"))
    assert sessions.get(carol.id) is carol
    assert sessions.get(old.id) is None
    assert sessions.get(None) is None
    assert sessions.get("nope") is None


def test_csrf_compares_the_whole_token() -> None:
    s = Sessions().new(ALICE)
    assert s.csrf_ok(s.csrf)
    assert not s.csrf_ok(None)
    assert not s.csrf_ok("")
    assert not s.csrf_ok(s.csrf[:-1])
