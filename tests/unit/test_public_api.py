"""The exported names of the transport packages are pinned."""

from __future__ import annotations

import pytest

import scheduler.client
import scheduler.server
import scheduler.worker


def test_server_exports() -> None:
    assert sorted(scheduler.server.__all__) == [
        "ListenError",
        "NotPromotedServer",
        "SERVICE_NAMES",
        "STATUS_CODES",
        "Server",
        "ServerConfig",
        "build_server",
        "code_of",
    ]


def test_client_exports() -> None:
    assert {"Client", "AdminClient", "TLSConfig", "Task", "TaskSpec", "RPCError"} <= set(
        scheduler.client.__all__
    )
    assert {
        "WorkflowInfo",
        "ScheduleInfo",
        "ExpectationInfo",
        "OverlapPolicy",
        "UpstreamPolicy",
    } <= set(scheduler.client.__all__)
    for name in scheduler.client.__all__:
        assert getattr(scheduler.client, name) is not None


def test_client_methods() -> None:
    """The client's calls, whichever module of ``scheduler/client`` holds them."""
    public = {
        cls.__name__: sorted(n for n in dir(cls) if not n.startswith("_"))
        for cls in (scheduler.client.Client, scheduler.client.AdminClient)
    }
    assert public == {
        "Client": [
            "cancel", "cancel_workflow", "close", "complete", "connect", "create_schedule",
            "delete_expectation", "delete_rate_limit", "delete_schedule", "fail", "get",
            "get_schedule", "get_workflow", "history", "list", "list_dispatch_pauses",
            "list_expectations", "list_page", "list_rate_limits", "list_schedules",
            "list_workers", "list_workflows", "pause_dispatch", "pause_schedule", "plan_bulk",
            "redrive",
            "register_expectation", "resume_dispatch", "resume_schedule", "run_bulk",
            "set_rate_limit", "submit", "submit_many", "submit_workflow", "wait",
        ],
        "AdminClient": [
            "close", "concurrency_limits", "connect", "create_api_key", "create_tenant",
            "get_tenant",
            "list_api_keys", "list_tenants", "revoke_api_key", "rotate_api_key",
            "set_concurrency_limit", "update_tenant",
        ],
    }  # fmt: skip


def test_worker_exports() -> None:
    assert sorted(scheduler.worker.__all__) == [
        "ApplicationError",
        "Batch",
        "BatchMismatch",
        "ClusterWorker",
        "DrainReport",
        "Handler",
        "Interrupted",
        "KafkaSource",
        "ReconnectConfig",
        "TLSConfig",
        "TaskContext",
        "Worker",
        "batch",
        "fetch_members",
    ]


def test_config_validation() -> None:
    import pytest

    from scheduler.client import TLSConfig
    from scheduler.server import ServerConfig

    with pytest.raises(ValueError, match="go together"):
        ServerConfig(tls_cert_path="c.pem")
    with pytest.raises(ValueError, match="admin_token"):
        ServerConfig(admin_token="short")
    with pytest.raises(ValueError, match="go together"):
        TLSConfig(client_cert=b"x")
    # gRPC's C core aborts the process on an empty certificate chain (issue 40's fuzzer).
    with pytest.raises(ValueError, match=r"TLSConfig\.client_cert is not PEM"):
        TLSConfig(client_cert=b"", client_private_key=b"-----BEGIN PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match=r"TLSConfig\.server_root_ca_cert is not PEM"):
        TLSConfig(server_root_ca_cert=b'{"us": 1}')


def test_worker_arguments_are_checked_when_it_is_made() -> None:
    from scheduler.types import Pool
    from scheduler.worker import KafkaSource, Worker

    kafka = KafkaSource(bootstrap_servers="127.0.0.1:9", pools=frozenset({Pool.STANDARD}))
    with pytest.raises(ValueError, match="start_on_delivery applies to the stream"):
        Worker("x:1", api_key="k", handlers={"t": print}, kafka=kafka, start_on_delivery=True)
    with pytest.raises(ValueError, match="at least one handler"):
        Worker("x:1", api_key="k", handlers={})
    with pytest.raises(ValueError, match="slots must be >= 1"):
        Worker("x:1", api_key="k", handlers={"t": print}, slots=0)


def test_a_worker_builds_spans_only_when_an_sdk_records_them() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider

    from scheduler.worker._tracing import tracing_off

    assert tracing_off(NoOpTracerProvider())
    assert tracing_off(ProxyTracerProvider())
    assert not tracing_off(TracerProvider())
