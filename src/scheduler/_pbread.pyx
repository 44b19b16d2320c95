# cython: language_level=3
"""The values the native readers make from protobuf's wire format: a UUID from its
canonical text, an aware UTC datetime from a Timestamp, UTF-8 text, and a trace
context (declared in ``_pbread.pxd`` beside the inline primitives; cimported by the
server's ``_stream_c`` and ``_submit_c``, the client's ``_tasks_c`` and the worker's
``_pushed_c``). Each answers None (``read_trace``: False) for what it does not take,
and the caller leaves the message to the general path."""

from cpython.datetime cimport (
    datetime_new,
    import_datetime,
    datetime_year, datetime_month, datetime_day, datetime_hour, datetime_minute,
    datetime_second, datetime_microsecond, datetime_tzinfo,
)
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject_GenericSetAttr
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint64_t

import datetime as _datetime
import uuid

from scheduler.limits import MAX_TIMESTAMP_SECONDS, MIN_TIMESTAMP_SECONDS

# The fields this codec handles, checked against the proto's descriptors by
# tests/unit/test_native_fields.py: per message, {field: the tag the code reads or
# writes it with} and the fields it leaves to the generated classes (the general path).
# A field added to the proto must be added here, one side or the other.
WIRE_FIELDS = {
    "google.protobuf.Timestamp": ({"seconds": 0x08, "nanos": 0x10}, ()),  # read_time
    "tickwheel.v1.TraceContext": ({"traceparent": 0x0A, "tracestate": 0x12}, ()),  # read_trace
}

cdef object _UUID = uuid.UUID
cdef object _UNKNOWN = uuid.SafeUUID.unknown
cdef object _UTC = _datetime.timezone.utc
import_datetime()
cdef int64_t _MIN_S = MIN_TIMESTAMP_SECONDS
cdef int64_t _MAX_S = MAX_TIMESTAMP_SECONDS
cdef str _S_INT = "int"
cdef str _S_IS_SAFE = "is_safe"
cdef str _S_TRACEPARENT = "traceparent"
cdef str _S_TRACESTATE = "tracestate"
cdef str _EMPTY_TEXT = ""


cdef object read_uuid(const unsigned char* p):
    """A ``uuid.UUID`` from 36 bytes of lowercase 8-4-4-4-12 hex, or None."""
    cdef uint64_t hi = 0
    cdef uint64_t lo = 0
    if not _uuid_parts(p, &hi, &lo):
        return None
    u = _UUID.__new__(_UUID)
    PyObject_GenericSetAttr(u, _S_INT, ((<object>hi) << 64) | (<object>lo))
    PyObject_GenericSetAttr(u, _S_IS_SAFE, _UNKNOWN)
    return u


cdef object read_uuid_bytes(const unsigned char* p):
    """The 16 bytes of a UUID written as 36 bytes of lowercase 8-4-4-4-12 hex, or None
    (for a reader that builds its own UUID type from them)."""
    cdef uint64_t hi = 0
    cdef uint64_t lo = 0
    cdef unsigned char out[16]
    cdef int i
    if not _uuid_parts(p, &hi, &lo):
        return None
    for i in range(8):
        out[i] = <unsigned char>((hi >> (56 - 8 * i)) & 0xFF)
        out[8 + i] = <unsigned char>((lo >> (56 - 8 * i)) & 0xFF)
    return PyBytes_FromStringAndSize(<char*>out, 16)


cdef object read_time(Reader* r, Py_ssize_t stop, bint bounded):
    """The Timestamp from the reader up to ``stop`` as an aware UTC datetime (its
    nanos cut to microseconds, as ``scheduler._wellknown.utc_datetime``), or None
    when malformed, its nanos out of range, or (``bounded``) its time outside the
    range the server accepts (``scheduler.limits``)."""
    cdef uint64_t tag
    cdef int64_t seconds = 0, nanos = 0
    cdef bint has_s = False, has_n = False
    while r.pos < stop:
        tag = _varint(r)
        if r.bad:
            return None
        if tag == 0x08 and not has_s:
            seconds = <int64_t>_varint(r)
            has_s = True
        elif tag == 0x10 and not has_n:
            nanos = <int64_t>_varint(r)  # an int32's varint sign-extends
            has_n = True
        else:
            return None
        if r.bad:
            return None
    if r.pos != stop or not (0 <= nanos < 1_000_000_000):
        return None
    if bounded and not (_MIN_S <= seconds < _MAX_S):
        return None
    return utc_at(seconds, <int>(nanos // 1000))


# Days between 0000-03-01 and 1970-01-01 in the proleptic Gregorian calendar, and the
# Unix seconds of 0001-01-01 and of 10000-01-01: a datetime's range.
cdef int64_t _EPOCH_DAYS = 719468
cdef int64_t _FIRST_S = -62135596800
cdef int64_t _END_S = 253402300800


cdef object utc_at(int64_t seconds, int micros):
    """The aware UTC datetime ``seconds`` (Unix) and ``micros`` after the epoch, as
    ``scheduler._wellknown._utc_at`` makes it; None outside years 1-9999. (The
    civil date from a day count: H. Hinnant's ``civil_from_days``; every quotient
    below is of non-negative numbers, so C's division is the floor.)"""
    cdef int64_t days, z, era, doe, yoe, doy, mp, y, sod
    cdef int m, d
    if not (_FIRST_S <= seconds < _END_S):
        return None
    days = seconds // 86400  # C division (setup.py: cdivision): toward zero
    sod = seconds - days * 86400
    if sod < 0:
        sod += 86400
        days -= 1
    z = days + _EPOCH_DAYS
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = <int>(doy - (153 * mp + 2) // 5 + 1)
    m = <int>(mp + 3 if mp < 10 else mp - 9)
    if m <= 2:
        y += 1
    return datetime_new(
        <int>y, m, d, <int>(sod // 3600), <int>(sod // 60 % 60), <int>(sod % 60), micros, _UTC
    )


cdef bint utc_parts(object dt, int64_t* seconds, int* micros) except -1:
    """Unix seconds and microseconds of ``dt`` if it is a datetime in UTC (its tzinfo
    ``timezone.utc``, as the store's and the readers' are); False for anything else
    (the caller takes the general path)."""
    cdef int64_t y, m, era, yoe, doy, doe, days
    if type(dt) is not _datetime.datetime or datetime_tzinfo(dt) is not _UTC:
        return False
    y = datetime_year(dt)
    m = datetime_month(dt)
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m - 3 if m > 2 else m + 9) + 2) // 5 + datetime_day(dt) - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - _EPOCH_DAYS
    seconds[0] = (
        days * 86400
        + datetime_hour(dt) * 3600
        + datetime_minute(dt) * 60
        + datetime_second(dt)
    )
    micros[0] = datetime_microsecond(dt)
    return True


cdef object read_text(Reader* r, Py_ssize_t n):
    """The next ``n`` bytes as UTF-8 text (the reader moves past them), or None when
    they are not UTF-8 (the reader stays)."""
    cdef object text
    if n == 0:
        return _EMPTY_TEXT
    try:
        text = PyUnicode_DecodeUTF8(<const char*>(r.buf + r.pos), n, NULL)
    except UnicodeDecodeError:
        return None
    r.pos += n
    return text


cdef object read_trace(Reader* r, Py_ssize_t stop):
    """The TraceContext from the reader up to ``stop`` as the SDKs' dict
    (``{"traceparent", "tracestate"}``; None when its traceparent is empty), or False
    when malformed."""
    cdef uint64_t tag
    cdef Py_ssize_t n
    cdef object parent = _EMPTY_TEXT
    cdef object state = _EMPTY_TEXT
    cdef bint has_p = False, has_s = False
    while r.pos < stop:
        tag = _varint(r)
        if r.bad or not (tag == 0x0A and not has_p or tag == 0x12 and not has_s):
            return False
        n = _length(r)
        if n < 0 or r.pos + n > stop:
            return False
        text = read_text(r, n)
        if text is None:
            return False
        if tag == 0x0A:
            parent = text
            has_p = True
        else:
            state = text
            has_s = True
    if r.pos != stop:
        return False
    if not parent:
        return None
    return {_S_TRACEPARENT: parent, _S_TRACESTATE: state}
