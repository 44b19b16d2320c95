"""Every RPC decodes its own request, so undecodable bytes answer INVALID_ARGUMENT.

grpcio's generated ``add_*Servicer_to_server`` hands the request bytes to the message
class's ``FromString`` before the handler runs; a failure there answers UNKNOWN with
the Python exception's text (or INTERNAL on a stream). :func:`add_service` registers
the same handlers with a bytes passthrough instead and decodes in a wrapper:

- bytes that are no valid message of the method's request type (bad wire format,
  invalid UTF-8 in a string field) answer INVALID_ARGUMENT
  ``request: is not a valid tickwheel.v1.X message``;
- a Struct (payload, result, checkpoint) nested deeper than the decoder can read
  answers INVALID_ARGUMENT naming the field and
  :data:`~scheduler.limits.MAX_JSON_DEPTH` (found by :func:`too_deep_field`, a small
  walk over the wire format guided by the descriptors, run only when decoding failed).

On the worker stream a message that does not decode ends the stream with the same
INVALID_ARGUMENT: it is a protocol violation, not a per-item problem.

With a :class:`~scheduler.server._regions.Router`, every call is routed home first,
before its bytes are decoded: a unary call of another region is forwarded there as raw
bytes (its response bytes come back as they are), a worker stream of another region
ends with WRONG_REGION (docs/regions.md).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, cast

import grpc
from google.protobuf import message as pb_message
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor

from scheduler._errors import InvalidArgument
from scheduler.limits import MAX_JSON_DEPTH
from scheduler.server._convert import DEPTH_PROBLEM
from scheduler.server._status import abort

if TYPE_CHECKING:
    from scheduler.server._regions import Router

Context = grpc.aio.ServicerContext[Any, Any]

_JSON_CONTAINERS = frozenset({"google.protobuf.Struct", "google.protobuf.ListValue"})
_JSON_TYPES = frozenset({*_JSON_CONTAINERS, "google.protobuf.Value"})


def decode(cls: Any, data: bytes) -> Any:
    """A ``cls`` message from ``data``; InvalidArgument when the bytes are not one."""
    try:
        return cls.FromString(data)
    except (pb_message.DecodeError, ValueError, RuntimeError, TypeError):
        field = too_deep_field(cls.DESCRIPTOR, data)
        if field is not None:
            raise InvalidArgument(field, DEPTH_PROBLEM) from None
        raise InvalidArgument(
            "request", f"is not a valid {cls.DESCRIPTOR.full_name} message"
        ) from None


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def too_deep_field(descriptor: Descriptor, data: bytes) -> str | None:
    """The path of the first Struct field in ``data`` nested deeper than MAX_JSON_DEPTH
    (``task.payload``, ``completions.items[2].result``), or None when there is none or
    the bytes are malformed before one is found."""
    try:
        return _walk(descriptor, data, 0, len(data), "", None, 0)
    except (ValueError, IndexError, RecursionError):
        return None


def _walk(
    desc: Descriptor, data: bytes, pos: int, end: int, path: str, root: str | None, depth: int
) -> str | None:
    """Walk one message; ``root`` is the path of the JSON value being walked (None
    outside one) and ``depth`` its nesting so far."""
    counts: dict[int, int] = {}
    while pos < end:
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _varint(data, pos, end)
            stop = pos + length
            if stop > end:
                raise ValueError("truncated field")
            field = desc.fields_by_number.get(number)
            if field is not None and field.type == FieldDescriptor.TYPE_MESSAGE:
                sub = cast(Descriptor, field.message_type)
                sub_root, sub_path = root, path
                if root is None:
                    sub_path = f"{path}.{field.name}" if path else field.name
                    if field.is_repeated:
                        index = counts.get(number, 0)
                        counts[number] = index + 1
                        sub_path = f"{sub_path}[{index}]"
                    if sub.full_name in _JSON_TYPES:
                        sub_root = sub_path
                sub_depth = depth + (1 if sub.full_name in _JSON_CONTAINERS else 0)
                if sub_root is not None and sub_depth > MAX_JSON_DEPTH:
                    return sub_root
                found = _walk(sub, data, pos, stop, sub_path, sub_root, sub_depth)
                if found is not None:
                    return found
            pos = stop
        else:
            raise ValueError("unsupported wire type")
    return None


# -- registration ----------------------------------------------------------------------


def _unary(
    fn: Callable[..., Any], read: Callable[[bytes], Any], path: str, router: Router | None
) -> Callable[[bytes, Context], Any]:
    async def handler(data: bytes, context: Context) -> Any:
        if router is not None:
            try:
                forwarded = await router.unary(path, data, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # mapped through the one table, never INTERNAL text
                await abort(context, exc)
            if forwarded is not None:
                return forwarded  # the home region's response bytes, as they came
        try:
            request = read(data)
        except InvalidArgument as exc:
            await abort(context, exc)
        return await fn(request, context)

    return handler


async def _decoded(raw: AsyncIterator[bytes], read: Callable[[bytes], Any]) -> AsyncIterator[Any]:
    inner = aiter(raw)
    try:
        async for data in inner:
            yield read(data)
    finally:
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()


def _stream(
    fn: Callable[..., AsyncIterator[Any]],
    read: Callable[[bytes], Any],
    path: str,
    router: Router | None,
) -> Callable[[AsyncIterator[bytes], Context], AsyncIterator[Any]]:
    async def handler(raw: AsyncIterator[bytes], context: Context) -> AsyncIterator[Any]:
        if router is not None:
            try:
                await router.stream(path, context)
            except grpc.aio.AbortError:
                raise
            except Exception as exc:  # WRONG_REGION, UNKNOWN_REGION, a refused key
                await abort(context, exc)
        responses = fn(_decoded(raw, read), context)
        try:
            async for response in responses:
                yield response
        finally:
            aclose = getattr(responses, "aclose", None)
            if aclose is not None:
                await aclose()

    return handler


def _serializer(response_cls: Any) -> Callable[[Any], bytes]:
    """A response message's bytes; a response written as bytes (a forwarded call's,
    or one encoded directly) passes as it is."""
    serialize = response_cls.SerializeToString

    def to_bytes(response: Any) -> bytes:
        return response if isinstance(response, bytes) else cast(bytes, serialize(response))

    return to_bytes


def service_handlers(
    servicer: Any,
    service: ServiceDescriptor,
    messages: Any,
    router: Router | None = None,
) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
    """The handler of every method of ``service`` by method name, served by the
    ``servicer`` method of the same name; ``messages`` is the generated module of its
    messages. With ``router``, each call is routed home before it is decoded. A method
    named in the servicer's ``REQUEST_DECODERS`` reads its request's bytes (each
    message's, on a stream) with that function instead of the generated class: it
    raises InvalidArgument for bytes that are no message, as :func:`decode` does, or
    hands the bytes on for the handler to read. Every response may be a message or its
    bytes."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    readers: dict[str, Callable[[bytes], Any]] = getattr(servicer, "REQUEST_DECODERS", {})
    for method in service.methods:
        request_cls = getattr(messages, method.input_type.name)
        response_cls = getattr(messages, method.output_type.name)
        fn = getattr(servicer, method.name)
        path = f"/{service.full_name}/{method.name}"
        read = readers.get(method.name, functools.partial(decode, request_cls))
        if method.client_streaming and method.server_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _stream(fn, read, path, router),
                response_serializer=_serializer(response_cls),
            )
        elif not method.client_streaming and not method.server_streaming:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(fn, read, path, router),
                response_serializer=_serializer(response_cls),
            )
        else:  # pragma: no cover - the API has no such method
            raise TypeError(f"{method.full_name}: only unary and bidi methods are served")
    return handlers


def add_service(
    server: grpc.aio.Server,
    servicer: Any,
    service: ServiceDescriptor,
    messages: Any,
    router: Router | None = None,
) -> None:
    """Register every method of ``service`` on ``server`` (:func:`service_handlers`)."""
    handlers = service_handlers(servicer, service, messages, router)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )
    server.add_registered_method_handlers(service.full_name, handlers)  # type: ignore[attr-defined]
