"""Bootstrap server addresses: their forms, and the check that they resolve.

``bootstrap_servers`` takes ``"host:port,host:port"`` or a list of
``host:port``; an IPv6 address goes in brackets (``[::1]:9092``). As Java and
librdkafka do, each address may carry a listener-style protocol prefix
(``SASL_SSL://broker:9093``). The prefix chooses nothing: every connection
uses ``security_protocol``, as in Java. A prefix that contradicts it is
refused (:func:`parse_bootstrap` with the configured protocol), since a
mismatch is almost always a forgotten ``security_protocol``, and connecting
PLAINTEXT to a TLS listener, or the reverse, only ever fails obscurely.

:func:`resolvable_bootstrap` is Java's check at construction
(``ClientUtils.parseAndValidateAddresses``): names that do not resolve are
left out with a warning, and when none resolves the producer refuses to
start with :class:`~aioproducer.errors.ConfigurationError`, naming each
address. It runs in ``start()``, not the constructor, through the event
loop's ``getaddrinfo`` (a thread), so it never blocks the loop, and a
producer can be built where the brokers' names do not resolve (a Spark
driver validating options its executors use).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from .security import SECURITY_PROTOCOLS

if TYPE_CHECKING:
    from ..telemetry.logs import ClientLogger

__all__ = ["format_address", "parse_bootstrap", "resolvable_bootstrap"]

_FORM = (
    "host:port, [ipv6]:port, or either prefixed by PLAINTEXT://, SSL://, "
    "SASL_PLAINTEXT:// or SASL_SSL://"
)


def format_address(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_bootstrap(
    servers: str | Iterable[str], security_protocol: str | None = None
) -> list[tuple[str, int]]:
    """``(host, port)`` pairs of ``"h1:9092,SSL://h2:9093,[::1]:9092"`` or a list of such.

    With ``security_protocol``, a protocol prefix must name it.
    """
    if isinstance(servers, str):
        items = servers.split(",")
    else:
        try:
            items = list(servers)
        except TypeError:
            raise ConfigurationError(
                f"bootstrap_servers must be a string or a list of strings, got {servers!r}"
            ) from None
    result = []
    for raw in items:
        if not isinstance(raw, str):
            raise ConfigurationError(f"bootstrap server {raw!r} is not a string")
        item = raw.strip()
        if item:
            result.append(_parse_one(item, security_protocol))
    if not result:
        raise ConfigurationError("bootstrap_servers names no server")
    return result


def _parse_one(item: str, security_protocol: str | None) -> tuple[str, int]:
    address = item
    scheme, sep, rest = item.partition("://")
    if sep:
        protocol = scheme.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigurationError(
                f"bootstrap server {item!r}: unknown protocol {scheme!r}; expected {_FORM}"
            )
        wanted = None if security_protocol is None else security_protocol.strip().upper()
        if wanted is not None and protocol != wanted:
            raise ConfigurationError(
                f"bootstrap server {item!r} says {protocol} but security_protocol is {wanted}: "
                f"set security_protocol={protocol!r} (the prefix does not choose the protocol, "
                f"as in Java), or drop the prefix"
            )
        address = rest
    if address.startswith("["):  # [ipv6]:port
        host, close, tail = address[1:].partition("]")
        port = tail[1:] if close and tail.startswith(":") else ""
    else:
        host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536 or "/" in host:
        raise ConfigurationError(f"bootstrap server {item!r} is not of the form {_FORM}")
    return host, int(port)


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])  # an IPv6 zone (%eth0) resolves too
    except ValueError:
        return False
    return True


async def resolvable_bootstrap(
    servers: list[tuple[str, int]], timeout: float, log: ClientLogger
) -> list[tuple[str, int]]:
    """The addresses of ``servers`` whose host resolves within ``timeout`` seconds.

    Each one left out is a warning; none left is a ConfigurationError naming
    every address and why it did not resolve (Java: "No resolvable bootstrap
    urls given in bootstrap.servers").
    """
    loop = asyncio.get_running_loop()

    async def failure(host: str, port: int) -> str | None:
        if _is_ip_literal(host):
            return None
        try:
            await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), max(timeout, 0.001)
            )
        except socket.gaierror as exc:
            return exc.strerror or str(exc)
        except asyncio.TimeoutError:
            return f"no answer from DNS within {timeout * 1000:.0f} ms"
        except (OSError, UnicodeError) as exc:
            return str(exc) or type(exc).__name__
        return None

    reasons = await asyncio.gather(*(failure(host, port) for host, port in servers))
    failed = [(format_address(*server), why) for server, why in zip(servers, reasons) if why]
    if len(failed) == len(servers):
        raise ConfigurationError(
            "no bootstrap server resolves: "
            + "; ".join(f"{address} ({why})" for address, why in failed)
        )
    for address, why in failed:
        log.warning("bootstrap server %s does not resolve (%s): left out", address, why)
    return [server for server, why in zip(servers, reasons) if not why]
