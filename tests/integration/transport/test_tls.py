"""TLS and mutual TLS with certificates made in the test."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import ipaddress
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from scheduler.client import Client, TLSConfig, Unavailable
from scheduler.server import Server, ServerConfig
from scheduler.worker import ClusterWorker, TaskContext
from tests.integration.transport.conftest import Stack


@dataclasses.dataclass
class Pem:
    cert: bytes
    key: bytes


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issue(
    cn: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None, *, server: bool
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer[0].subject if issuer else _name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
    )
    if issuer is None:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
    else:
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), False)
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                False,
            )
    cert = builder.sign(issuer[1] if issuer else key, hashes.SHA256())
    return cert, key


def _pem(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pem:
    return Pem(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


@dataclasses.dataclass
class Pki:
    ca: Pem
    server: Pem
    client: Pem
    dir: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = _issue("tickwheel-test-ca", None, server=False)
    server = _issue("localhost", ca, server=True)
    client = _issue("worker-1", ca, server=False)
    d = tmp_path_factory.mktemp("pki")
    pki = Pki(_pem(*ca), _pem(*server), _pem(*client), d)
    (d / "ca.pem").write_bytes(pki.ca.cert)
    (d / "server.pem").write_bytes(pki.server.cert)
    (d / "server.key").write_bytes(pki.server.key)
    return pki


async def _tls_server(stack: Stack, pki: Pki, *, mutual: bool) -> Server:
    config = ServerConfig(
        listen="127.0.0.1:0",
        tls_cert_path=str(pki.dir / "server.pem"),
        tls_key_path=str(pki.dir / "server.key"),
        tls_client_ca_path=str(pki.dir / "ca.pem") if mutual else None,
    )
    server = Server(stack.engine, config)
    await server.start()
    return server


@pytest.fixture
async def tls_server(stack: Stack, pki: Pki) -> AsyncIterator[Server]:
    server = await _tls_server(stack, pki, mutual=False)
    yield server
    await server.stop(0)


@pytest.fixture
async def mtls_server(stack: Stack, pki: Pki) -> AsyncIterator[Server]:
    server = await _tls_server(stack, pki, mutual=True)
    yield server
    await server.stop(0)


async def test_tls_round_trip(stack: Stack, pki: Pki, tls_server: Server) -> None:
    client = await Client.connect(
        f"localhost:{tls_server.port}",
        api_key=stack.key_a,
        tls=TLSConfig(server_root_ca_cert=pki.ca.cert),
    )
    try:
        task = await client.submit("t", {"over": "tls"})
        assert (await client.get(task.id)).payload == {"over": "tls"}
    finally:
        await client.close()


async def test_tls_rejects_plaintext_and_unknown_ca(
    stack: Stack, pki: Pki, tls_server: Server
) -> None:
    with pytest.raises(Unavailable):
        await Client.connect(
            f"localhost:{tls_server.port}", api_key=stack.key_a, connect_timeout_s=3
        )
    other_ca = _pem(*_issue("other-ca", None, server=False))
    with pytest.raises(Unavailable):
        await Client.connect(
            f"localhost:{tls_server.port}",
            api_key=stack.key_a,
            tls=TLSConfig(server_root_ca_cert=other_ca.cert),
            connect_timeout_s=3,
        )


async def test_mtls_requires_client_certificate(
    stack: Stack, pki: Pki, mtls_server: Server
) -> None:
    target = f"localhost:{mtls_server.port}"
    with pytest.raises(Unavailable):
        await Client.connect(
            target,
            api_key=stack.key_a,
            tls=TLSConfig(server_root_ca_cert=pki.ca.cert),
            connect_timeout_s=3,
        )
    client = await Client.connect(
        target,
        api_key=stack.key_a,
        tls=TLSConfig(
            server_root_ca_cert=pki.ca.cert,
            client_cert=pki.client.cert,
            client_private_key=pki.client.key,
        ),
    )
    try:
        task = await client.submit("t", {"over": "mtls"})
        assert task.payload == {"over": "mtls"}
    finally:
        await client.close()


async def test_a_cluster_worker_on_one_tls_node_dials_the_name_it_was_given(
    stack: Stack, pki: Pki, tls_server: Server
) -> None:
    """The default worker (issue 42) on a single node streams to the seed as given
    (``localhost``, the certificate's name), not to the address the node advertises,
    and runs tasks over TLS as ``Worker`` does."""
    ran = asyncio.Event()

    async def handle(ctx: TaskContext) -> dict[str, str]:
        ran.set()
        return {"over": "tls"}

    target = f"localhost:{tls_server.port}"
    tls = TLSConfig(server_root_ca_cert=pki.ca.cert)
    worker = ClusterWorker(target, api_key=stack.key_a, handlers={"t": handle}, tls=tls)
    run = asyncio.create_task(worker.run(), name="tls-cluster-worker")
    client = await Client.connect(target, api_key=stack.key_a, tls=tls)
    try:
        task = await client.submit("t", {})
        await asyncio.wait_for(ran.wait(), 30)
        done = await client.wait(task.id, 30)
        assert done.result == {"over": "tls"}
        assert worker.members == {"seed": target}
    finally:
        await client.close()
        await worker.shutdown(2)
        await run
