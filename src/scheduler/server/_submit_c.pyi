from google.protobuf import struct_pb2

from scheduler.engine import SubmitSpec
from scheduler.types import JSON

EMPTY_PAYLOAD: struct_pb2.Struct

def decode_submit(
    data: bytes, max_payload_bytes: int, default_trace: JSON | None
) -> tuple[list[SubmitSpec], list[bytes | struct_pb2.Struct]] | None: ...
