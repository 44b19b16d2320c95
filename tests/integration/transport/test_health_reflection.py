"""grpcurl-style discovery: health checking and server reflection answer."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.integration.transport.conftest import Stack


async def test_health_check_serving(stack: Stack) -> None:
    async with grpc.aio.insecure_channel(stack.target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "tickwheel.v1.SchedulerService", "tickwheel.v1.WorkerService"):
            resp = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_services(stack: Stack) -> None:
    async with grpc.aio.insecure_channel(stack.target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
        names: set[str] = set()
        async for resp in call:
            names |= {s.name for s in resp.list_services_response.service}
        assert {
            "tickwheel.v1.SchedulerService",
            "tickwheel.v1.WorkerService",
            "tickwheel.v1.AdminService",
            "grpc.health.v1.Health",
        } <= names
        call = stub.ServerReflectionInfo(
            iter(
                [
                    reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="tickwheel.v1.SchedulerService"
                    )
                ]
            ),
            timeout=10,
        )
        async for resp in call:
            assert resp.file_descriptor_response.file_descriptor_proto


async def test_reflection_answers_v1_as_well_as_v1alpha(stack: Stack) -> None:
    """Tools that ask ``grpc.reflection.v1`` first (grpcurl, Postman) get an answer:
    the v1 messages are v1alpha's on the wire."""
    async with grpc.aio.insecure_channel(stack.target) as channel:
        call = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )(
            iter(
                [
                    reflection_pb2.ServerReflectionRequest(list_services=""),
                    reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="grpc.reflection.v1.ServerReflection"
                    ),
                    reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="tickwheel.v1.WorkerService"
                    ),
                ]
            ),
            timeout=10,
        )
        responses = [r async for r in call]
    names = {s.name for s in responses[0].list_services_response.service}
    assert {"tickwheel.v1.SchedulerService", "grpc.reflection.v1.ServerReflection"} <= names
    assert "grpc.reflection.v1alpha.ServerReflection" in names
    assert responses[1].file_descriptor_response.file_descriptor_proto
    assert responses[2].file_descriptor_response.file_descriptor_proto
