"""Opening a connection to a broker: TCP, TLS, and the ApiVersions negotiation (KIP-511).

:func:`open_connection` hands back a :class:`~.connection.BrokerConnection`
that knows which version of each API to speak with its broker. Every way the
opening can fail becomes a typed error that names the broker: a certificate
that did not verify, a TLS alert, a connect timeout, a refused or unreachable
address, or a broker that hung up right after the handshake (TLS 1.3 reports a
refused client certificate that way).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from .. import errors
from ..protocol.apis import API_VERSIONS, APIS_BY_KEY, negotiate_version
from ..protocol.generated import ApiVersionsRequest
from .connection import READ_CHUNK, BrokerConnection, TrafficRecorder, ssl_reason

__all__ = ["open_connection"]


async def open_connection(
    node_id: int,
    host: str,
    port: int,
    *,
    client_id: str | None,
    request_timeout_ms: int,
    connect_timeout: float,
    client_software_version: str = "0",
    traffic: TrafficRecorder | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> BrokerConnection:
    """Connect (through TLS when ``ssl_context`` is given), set TCP_NODELAY,
    and negotiate API versions.

    TLS uses ``host``, the bootstrap or advertised broker host, for SNI and
    for the hostname check, so every connection is verified the same way.

    ApiVersions is sent at the highest version we know; a broker that answers
    UNSUPPORTED_VERSION gets it again at the highest version its answer lists
    (v0 when it lists none; KIP-511).
    """
    tls: dict[str, Any] = {}
    if ssl_context is not None:
        tls = {
            "ssl": ssl_context,
            "server_hostname": host,
            "ssl_handshake_timeout": connect_timeout,
        }
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=READ_CHUNK, **tls), connect_timeout
        )
    except ssl.SSLCertVerificationError as exc:
        raise errors.SslError(
            f"broker {node_id} at {host}:{port}: its certificate did not verify: "
            f"{exc.verify_message or ssl_reason(exc)}"
        ) from None
    except ssl.SSLError as exc:
        raise errors.SslError(f"broker {node_id} at {host}:{port}: {ssl_reason(exc)}") from None
    except asyncio.TimeoutError:
        raise errors.ConnectionFailedError(
            f"broker {node_id} at {host}:{port}: no connection within {connect_timeout * 1000:.0f} ms"
        ) from None
    except OSError as exc:
        raise errors.ConnectionFailedError(f"broker {node_id} at {host}:{port}: {exc}") from None
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn = BrokerConnection(
        node_id,
        host,
        port,
        reader,
        writer,
        client_id=client_id,
        request_timeout_ms=request_timeout_ms,
        traffic=traffic,
    )
    try:
        conn.api_versions = await _negotiate(conn, client_software_version, connect_timeout)
    except errors.ConnectionLostError as exc:
        await conn.close()
        if ssl_context is None:
            raise
        # With TLS 1.3 the broker checks the client certificate after the
        # client's side of the handshake is done; a broker that refuses it
        # (or its absence) may just hang up instead of sending an alert.
        raise errors.SslError(
            f"broker {node_id} at {host}:{port} closed the connection right after the TLS "
            f"handshake, before answering ApiVersions: it most likely refused the client "
            f"certificate, or needs one (ssl_certfile/ssl_keyfile) ({exc.message})"
        ) from None
    except errors.SslError as exc:
        await conn.close()
        # A TLS 1.3 alert after our side of the handshake is about our
        # certificate: Kafka sends "bad certificate" when it requires one
        # (ssl.client.auth=required) and got none, or one it does not trust.
        raise errors.SslError(
            f"{exc.message}: the broker refused the client certificate, or needs one "
            f"(ssl_certfile/ssl_keyfile)"
        ) from None
    except BaseException:
        await conn.close()
        raise
    return conn


async def _negotiate(
    conn: BrokerConnection, software_version: str, timeout: float
) -> dict[int, int]:
    body = ApiVersionsRequest(
        client_software_name="aioproducer", client_software_version=software_version
    )
    response = await conn.request(
        API_VERSIONS, body, version=API_VERSIONS.max_version, timeout=timeout
    )
    if response.error_code == errors.UnsupportedVersionError.code:
        # KIP-511: the refusal lists the ApiVersions versions the broker speaks;
        # ask again at the highest of them we speak too (as Java's NetworkClient
        # does), so the broker still learns the client's name. v0 without a list.
        advertised = {k.api_key: k.max_version for k in response.api_keys}
        retry = min(advertised.get(API_VERSIONS.key, 0), API_VERSIONS.max_version)
        response = await conn.request(API_VERSIONS, body, version=retry, timeout=timeout)
    errors.raise_for_code(response.error_code, f"ApiVersions from broker {conn.node_id}")
    versions: dict[int, int] = {}
    for entry in response.api_keys:
        api = APIS_BY_KEY.get(entry.api_key)
        if api is None:
            continue
        chosen = negotiate_version(api, entry.min_version, entry.max_version)
        if chosen is not None:
            versions[api.key] = chosen
    epoch = response.finalized_features_epoch  # -1 below v3 and when the broker has none
    if epoch >= 0:
        conn.finalized_features_epoch = epoch
        conn.finalized_features = {f.name: f.max_version_level for f in response.finalized_features}
    return versions
