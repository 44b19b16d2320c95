"""What the worker SDK sends of a handler's exception: its type, its message and its
traceback (``Failure.error_type``, ``error``, ``traceback``)."""

from __future__ import annotations

from scheduler.worker._context import MAX_TRACEBACK_CHARS, error_of, traceback_of


def _raised(exc: BaseException) -> BaseException:
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise exc from inner
    except BaseException as caught:
        return caught


def test_the_type_message_and_whole_chained_traceback() -> None:
    exc = _raised(ValueError("bad sku"))
    assert error_of(exc) == ("ValueError", "bad sku")
    text = traceback_of(exc)
    assert text.startswith("Traceback (most recent call last):")
    assert "KeyError: 'inner'" in text  # the cause, as Python prints it
    assert "direct cause" in text
    assert text.rstrip().endswith("ValueError: bad sku")
    assert "test_failure_text.py" in text


def test_a_silent_exception_is_named_by_its_type_and_a_long_traceback_keeps_its_end() -> None:
    assert error_of(RuntimeError()) == ("RuntimeError", "RuntimeError")

    class Ünicode(Exception):
        pass

    assert error_of(Ünicode("x")) == ("", "x")  # the wire takes ASCII type names only
    long = _raised(ValueError("z" * (MAX_TRACEBACK_CHARS * 2)))
    text = traceback_of(long)
    assert len(text) == MAX_TRACEBACK_CHARS
    assert text.startswith("…")
    assert text.rstrip().endswith("z")
