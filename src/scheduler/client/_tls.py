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
        # gRPC's C core aborts the process (a core dump, not an exception) on an empty
        # certificate chain, so what is not PEM is refused here.
        for name in ("server_root_ca_cert", "client_cert", "client_private_key"):
            value = getattr(self, name)
            if value is not None and not is_pem(value):
                raise ValueError(f"TLSConfig.{name} is not PEM (no '-----BEGIN' line)")


def is_pem(data: bytes) -> bool:
    """Whether ``data`` holds a PEM block (what gRPC takes for certificates and keys)."""
    return b"-----BEGIN " in data
