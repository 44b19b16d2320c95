"""The dashboard's boundary rules on their own: which ``Host`` names it answers, which
``Origin`` / ``Sec-Fetch-Site`` of a POST it believes, and the per-browser login
throttle (issue 36). The middleware is tested against a real node in
tests/integration/ui/test_boundary.py."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from scheduler.ui._boundary import (
    LoginThrottle,
    allowed_hosts,
    host_name,
    host_refusal,
    origin_refusal,
)

HOST = "127.0.0.1:8090"


def test_the_allowed_names_are_loopback_the_bound_address_and_the_operators() -> None:
    assert allowed_hosts("127.0.0.1") == {"localhost", "127.0.0.1", "::1"}
    assert allowed_hosts("0.0.0.0") == {"localhost", "127.0.0.1", "::1"}
    assert "10.1.2.3" in allowed_hosts("10.1.2.3")
    assert "tw.internal" in allowed_hosts("::", ["TW.Internal.", " "])


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost:8090", "localhost"),
        ("LOCALHOST", "localhost"),
        ("[::1]:8090", "::1"),
        ("localhost.:8090", "localhost"),
        ("rebind.attacker.example:8090", "rebind.attacker.example"),
        ("127.0.0.1:notaport", None),
        ("", None),
        (None, None),
    ],
)
def test_host_name(header: str | None, name: str | None) -> None:
    assert host_name(header) == name


def test_a_foreign_host_is_refused_and_named() -> None:
    allowed = allowed_hosts("127.0.0.1")
    ok = make_mocked_request("GET", "/", headers={"Host": "localhost:8090"})
    assert host_refusal(ok, allowed) is None
    bad = make_mocked_request("GET", "/", headers={"Host": "rebind.attacker.example:8090"})
    refusal = host_refusal(bad, allowed)
    assert refusal is not None
    assert "rebind.attacker.example" in refusal
    assert "--allowed-host" in refusal


@pytest.mark.parametrize(
    ("headers", "refused"),
    [
        ({}, False),  # curl: no browser page made it; the CSRF token guards it
        ({"Origin": "http://127.0.0.1:8090"}, False),
        ({"Origin": "https://127.0.0.1:8090"}, False),  # behind a TLS proxy
        ({"Origin": "null", "Sec-Fetch-Site": "same-origin"}, False),  # no-referrer pages
        ({"Sec-Fetch-Site": "none"}, False),
        ({"Origin": "http://evil.example"}, True),
        ({"Origin": "http://127.0.0.1:9999"}, True),
        ({"Origin": "http://rebind.attacker.example:8090"}, True),
        ({"Origin": "null"}, True),
        ({"Origin": "null", "Sec-Fetch-Site": "cross-site"}, True),
        ({"Sec-Fetch-Site": "same-site"}, True),
        ({"Origin": "http://127.0.0.1:8090", "Sec-Fetch-Site": "cross-site"}, False),
    ],
)
def test_origin_of_a_post(headers: dict[str, str], refused: bool) -> None:
    request = make_mocked_request("POST", "/tasks/x/cancel", headers={"Host": HOST, **headers})
    assert (origin_refusal(request) is not None) is refused
    get = make_mocked_request("GET", "/", headers={"Host": HOST, **headers})
    assert origin_refusal(get) is None


def test_the_login_throttle_blocks_one_browser_only_and_lets_it_go() -> None:
    now = [0.0]
    throttle = LoginThrottle(limit=3, window_s=60, block_s=30, clock=lambda: now[0])
    for _ in range(2):
        throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") is None
    throttle.failed("10.0.0.1")
    assert throttle.retry_after("10.0.0.1") == 30
    assert throttle.retry_after("10.0.0.2") is None
    now[0] = 31
    assert throttle.retry_after("10.0.0.1") is None
    # Failures spread wider than the window never add up.
    for _ in range(5):
        throttle.failed("10.0.0.3")
        now[0] += 40
        throttle.failed("10.0.0.3")
        now[0] += 40
    assert throttle.retry_after("10.0.0.3") is None
