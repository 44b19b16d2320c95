"""TLS settings for clients and workers."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TLSConfig:
    """How to reach a TLS server (PEM bytes, not paths: the caller decides where keys live).

    Leave every field empty to trust the system roots. Set ``client_cert`` and
    ``client_private_key`` together for mutual TLS.
    """

    server_root_ca_cert: bytes | None = None
    """PEM CA bundle that signed the server certificate (None: system roots)."""
    client_cert: bytes | None = None
    """PEM client certificate chain for mutual TLS."""
    client_private_key: bytes | None = None
    """PEM private key of ``client_cert``."""
    domain: str | None = None
    """Server name to verify instead of the target's host (SNI / name override)."""

    def __post_init__(self) -> None:
        if (self.client_cert is None) != (self.client_private_key is None):
            raise ValueError("TLSConfig.client_cert and client_private_key go together")
