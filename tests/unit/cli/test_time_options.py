"""Issue 40, items 1 and 2: ``--at`` reads a bare time of day as the README shows it,
and no value of ``--in`` or ``--at`` ends in a traceback (the real ``tickwheel``)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta, timezone

import click
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.cli import main
from scheduler.cli._tasks import _next_occurrence, parse_at
from tests.support.processes import run_cli_result

NOW = datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC)


def test_a_time_of_day_still_ahead_is_today() -> None:
    assert _next_occurrence(time(21, 38, 40, tzinfo=UTC), NOW) == datetime(
        2026, 12, 6, 21, 38, 40, tzinfo=UTC
    )


def test_a_time_of_day_already_past_is_tomorrow() -> None:
    assert _next_occurrence(time(9, 0, tzinfo=UTC), NOW) == datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    assert _next_occurrence(time(12, 0, tzinfo=UTC), NOW) == NOW  # now itself is ahead


def test_a_time_of_day_with_an_offset_is_read_in_that_offset() -> None:
    plus_one = timezone(timedelta(hours=1))
    # 12:30+01:00 is 11:30 UTC: already past at 12:00 UTC, so tomorrow.
    assert _next_occurrence(time(12, 30, tzinfo=plus_one), NOW) == datetime(
        2026, 12, 7, 11, 30, tzinfo=UTC
    )


def test_parse_at_reads_a_bare_time_as_utc_within_a_day_and_iso_as_before() -> None:
    before = datetime.now(UTC)
    when = parse_at("21:38:40", time_of_day=True)
    assert when.tzinfo is not None
    assert (when.hour, when.minute, when.second) == (21, 38, 40)
    assert when.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= when <= before + timedelta(days=1)
    assert parse_at("2030-01-31T09:00:00") == datetime(2030, 1, 31, 9, tzinfo=UTC)
    assert parse_at("2030-01-31 09:00+01:00") == datetime(2030, 1, 31, 8, tzinfo=UTC)
    with pytest.raises(click.BadParameter):
        parse_at("21:38:40")  # --from/--to of bulk stay ISO only


def test_submit_help_states_the_time_of_day_rule() -> None:
    result = CliRunner().invoke(main, ["submit", "--help"], terminal_width=200)
    text = " ".join(result.output.split())
    assert "a time of day (21:38:40) meaning its next occurrence" in text
    assert "UTC unless an offset is given" in text


@pytest.mark.parametrize("value", ["1e12", "nan", "inf", "1e300", "-inf", "-1"])
def test_a_hostile_in_is_one_usage_line_naming_in(value: str) -> None:
    result = run_cli_result(["submit", "hello", "--in", value, "--api-key", "k"])
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert line.startswith("Error: Invalid value for --in: ")
    assert "is not a delay" in line


def test_a_bad_time_of_day_is_one_usage_line_naming_at() -> None:
    result = run_cli_result(["submit", "hello", "--at", "25:00", "--api-key", "k"])
    assert result.returncode == 2
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]
    assert "--at" in line
    assert "a time of day such as 21:38:40" in line


_HOSTILE = st.one_of(
    st.floats().map(repr),
    st.integers().map(str),
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e308", "1e309", "-0", "0x10", "1_000"]),
    st.text(max_size=40),
    st.times(timezones=st.timezones() | st.just(UTC)).map(time.isoformat),
    st.datetimes(timezones=st.timezones() | st.just(UTC)).map(datetime.isoformat),
)


@settings(max_examples=500, deadline=None, database=None)
@given(option=st.sampled_from(["--in", "--at"]), value=_HOSTILE)
def test_no_time_value_ends_in_a_traceback(option: str, value: str) -> None:
    """A refused value is a usage error (exit 2) naming the option; an accepted one gets
    as far as connecting (exit 1: nothing listens), never a traceback."""
    result = CliRunner().invoke(
        main,
        ["submit", "hello", option, value, "--target", "127.0.0.1:1", "--api-key", "k"],
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    assert result.exit_code in (1, 2), result.output
    errors = [ln for ln in result.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, result.output
    if result.exit_code == 2:
        assert option in errors[0]
