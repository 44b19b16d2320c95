"""Server configuration: one frozen dataclass, units in the field names."""

from __future__ import annotations

import dataclasses

from scheduler.limits import (
    AUTH_FAILURE_WINDOW_S,
    AUTH_FAILURES_PER_SOURCE,
    AUTH_THROTTLE_S,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_INFLIGHT_CALLS_PER_KEY,
    MAX_STREAMS_PER_TENANT,
    STREAM_KEY_RECHECK_S,
)
from scheduler.regions import DEFAULT_REGION, REGION_NAME, RegionDirectory


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """How the gRPC server listens and authenticates. Validated on construction."""

    listen: str = "127.0.0.1:50051"
    """host:port to bind (port 0 picks a free one; see :attr:`Server.port`)."""
    advertise: str = ""
    """host:port workers dial to reach this node (``WorkerService.Members``, Welcome);
    empty: :attr:`listen`."""
    admin_token: str | None = None
    """Token AdminService calls must present in ``x-admin-token``; None disables admin."""
    tls_cert_path: str | None = None
    """PEM server certificate chain; with ``tls_key_path`` turns TLS on."""
    tls_key_path: str | None = None
    """PEM private key of the server certificate."""
    tls_client_ca_path: str | None = None
    """PEM CA bundle; when set clients must present a certificate it signed (mTLS)."""
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    """Largest serialised task payload accepted."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest gRPC message received or sent (a SubmitTasks batch of 10,000 tasks fits);
    set on the server explicitly, a larger request is RESOURCE_EXHAUSTED."""
    hello_timeout_s: float = 10.0
    """How long a new worker stream may take to send its hello."""
    stop_grace_s: float = 5.0
    """How long :meth:`Server.stop` lets in-flight calls finish."""
    reuse_port: bool = False
    """Share the port with other processes (``SO_REUSEPORT``). Off by default: grpcio
    turns it on, and then a second server on the same port starts normally and clients
    land on either."""
    # -- regions (docs/regions.md) ---------------------------------------------------
    region: str = DEFAULT_REGION
    """The region this node serves; calls whose home is another region go there."""
    regions: RegionDirectory = dataclasses.field(default_factory=RegionDirectory)
    """Every region and where it answers; empty: a single region, nothing is routed.
    When given, it must list :attr:`region`."""
    # -- API keys and server protection (docs/keys.md) --------------------------------
    max_streams_per_tenant: int = MAX_STREAMS_PER_TENANT
    """Open worker streams of one tenant on this server (RESOURCE_EXHAUSTED past it)."""
    max_inflight_calls_per_key: int = MAX_INFLIGHT_CALLS_PER_KEY
    """Unary calls of one API key served at once (RESOURCE_EXHAUSTED past it)."""
    auth_failures_per_source: int = AUTH_FAILURES_PER_SOURCE
    """Failed authentications of one source address within ``auth_failure_window_s``
    before it is throttled."""
    auth_failure_window_s: float = AUTH_FAILURE_WINDOW_S
    """The window the failures are counted over."""
    auth_throttle_s: float = AUTH_THROTTLE_S
    """How long a throttled source is refused without a store look-up."""
    dashboard_secret: str | None = None
    """Shared with the web dashboard (``tickwheel ui --dashboard-secret``; ``dev`` makes
    one): a call that carries it in ``x-tickwheel-dashboard`` is throttled per the
    browser address it names in ``x-tickwheel-client-address``, not per the dashboard's
    own address, so one browser's failed logins do not lock out every dashboard user.
    Without it (or with a wrong one) those headers are ignored: no other caller can
    choose the address it is throttled as. At least 16 characters."""
    stream_key_recheck_s: float = STREAM_KEY_RECHECK_S
    """How often an open worker stream re-checks its key (a revoked or expired key ends
    it within this, plus the auth cache for a revocation on another node)."""

    def __post_init__(self) -> None:
        if not self.listen:
            raise ValueError("ServerConfig.listen is required")
        if (self.tls_cert_path is None) != (self.tls_key_path is None):
            raise ValueError("ServerConfig.tls_cert_path and tls_key_path go together")
        if self.tls_client_ca_path is not None and self.tls_cert_path is None:
            raise ValueError("ServerConfig.tls_client_ca_path needs tls_cert_path/tls_key_path")
        if self.admin_token is not None and len(self.admin_token) < 16:
            raise ValueError("ServerConfig.admin_token must be at least 16 characters")
        if self.dashboard_secret is not None and len(self.dashboard_secret) < 16:
            raise ValueError("ServerConfig.dashboard_secret must be at least 16 characters")
        for name in (
            "max_streams_per_tenant",
            "max_inflight_calls_per_key",
            "auth_failures_per_source",
            "auth_failure_window_s",
            "auth_throttle_s",
            "stream_key_recheck_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"ServerConfig.{name} must be positive")
        if not REGION_NAME.match(self.region):
            raise ValueError(f"ServerConfig.region: {self.region!r} is not a region name")
        if len(self.regions) and self.region not in self.regions:
            known = ", ".join(self.regions.names)
            raise ValueError(
                f"ServerConfig.region {self.region!r} is not in the region directory "
                f"(known: {known}): list this node's own region too"
            )
        for name in ("max_payload_bytes", "max_message_bytes", "hello_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ServerConfig.{name} must be positive")
        if self.stop_grace_s < 0:
            raise ValueError("ServerConfig.stop_grace_s must be >= 0")

    @property
    def tls(self) -> bool:
        """Whether the server listens with TLS."""
        return self.tls_cert_path is not None
