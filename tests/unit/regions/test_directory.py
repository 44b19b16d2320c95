"""The region directory's two spellings and the region an API key names."""

from __future__ import annotations

import secrets

import pytest

from scheduler._errors import InvalidArgument
from scheduler.regions import (
    Region,
    RegionDirectory,
    check_region_name,
    key_region,
    key_secret,
)


def test_inline_form_keeps_endpoint_order() -> None:
    d = RegionDirectory.parse("us=127.0.0.1:1|127.0.0.1:2, eu=127.0.0.1:3")
    assert d.names == ("eu", "us")
    assert d.endpoints("us") == ("127.0.0.1:1", "127.0.0.1:2")
    assert "eu" in d
    assert "ap" not in d


def test_json_round_trip(tmp_path) -> None:
    d = RegionDirectory(
        {"us": Region("us", ("a:1", "b:2"), "postgresql://x"), "eu": Region("eu", ("c:3",))}
    )
    path = tmp_path / "regions.json"
    path.write_text(d.to_json())
    assert RegionDirectory.load(path) == d
    assert RegionDirectory.parse(d.to_json()) == d


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("us", "is not NAME=HOST:PORT"),
        ("US=a:1", "is not a region name"),
        ("us=a", "is not HOST:PORT"),
        ("us=a:0", "is not HOST:PORT"),
        ("us=", "lists no endpoint"),
        ("us=a:1,us=b:2", "listed twice"),
        ('{"regions": []}', "must be"),
        ("{nope", "not valid JSON"),
    ],
)
def test_bad_directories_name_the_problem(text: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem) as err:
        RegionDirectory.parse(text)
    assert err.value.field == "regions"


def test_unknown_region_lists_the_known_ones() -> None:
    d = RegionDirectory.parse("us=a:1,eu=b:2")
    with pytest.raises(InvalidArgument, match=r"unknown region 'ap' \(known: eu, us\)"):
        d.get("ap")


def test_a_key_names_its_region_before_it_is_verified() -> None:
    for _ in range(1000):
        token = secrets.token_urlsafe(32)
        assert key_region(key_secret("eu-west", token)) == "eu-west"
        # keys made before regions (tw_<token>) name none, whatever their token holds
        assert key_region("tw_" + token) is None
    assert key_region("") is None
    assert key_region("tw_.abc") is None
    assert key_region("xx_eu.abc") is None
    with pytest.raises(InvalidArgument):
        key_secret("EU", "abc")


@pytest.mark.parametrize("name", ["eu\n", "", "EU", "e_u", "1eu"])
def test_a_region_name_is_checked_whole(name: str) -> None:
    """A trailing newline is not a region name (a `$` pattern let one through)."""
    with pytest.raises(InvalidArgument, match="is not a region name"):
        check_region_name(name)
    assert key_region(f"tw_{name}.token") is None
