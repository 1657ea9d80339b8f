"""Refusals from a real broker: ``tansu broker --authentication``.

Tansu 0.6 in this mode keeps no users, so a SCRAM login always ends in the
server-final ``e=unknown-user``; PLAIN it does not offer, and it closes the
connection in answer to the SaslHandshake (tests/golden/README.md). Both
must reach the caller of ``start()`` as errors that say what happened, within
``max_block_ms``, with the password nowhere in them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from aioproducer import Producer, errors
from aioproducer.embedded import LocalBroker
from tests.support.aio import within

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

PASSWORD = "tansu-Secret-42"
MAX_BLOCK_MS = 3000


@pytest.fixture(scope="module")
def auth_broker(tansu_binary: str) -> Iterator[LocalBroker]:
    broker = LocalBroker(binary=tansu_binary, extra_args=["--authentication"]).start()
    try:
        yield broker
    finally:
        broker.stop()


def sasl_producer(broker: LocalBroker, mechanism: str) -> Producer:
    return Producer(
        broker.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=PASSWORD,
        max_block_ms=MAX_BLOCK_MS,
    )


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_unknown_user_is_an_authentication_error(
    auth_broker: LocalBroker, mechanism: str
) -> None:
    p = sasl_producer(auth_broker, mechanism)
    started = time.monotonic()
    with pytest.raises(errors.SaslAuthenticationError) as info:
        await within(p.start(), MAX_BLOCK_MS / 1000 + 10, "start")
    # Refused on the first attempt: no waiting out max_block_ms.
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000
    text = str(info.value)
    assert "unknown-user" in text and mechanism in text
    assert auth_broker.bootstrap_servers.split(":")[1] in text  # names the broker
    assert PASSWORD not in text and PASSWORD not in repr(info.value)
    assert info.value.code == 58
    await p.close()


async def test_plain_refused_by_tansu_names_the_handshake(auth_broker: LocalBroker) -> None:
    p = sasl_producer(auth_broker, "PLAIN")
    started = time.monotonic()
    # Tansu hangs up instead of answering UNSUPPORTED_SASL_MECHANISM, which a
    # client cannot tell from a network drop: it retries until max_block_ms.
    with pytest.raises(errors.NoBrokersAvailableError) as info:
        await within(p.start(), MAX_BLOCK_MS / 1000 + 10, "start")
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000 + 5
    text = str(info.value)
    assert "SaslHandshake for PLAIN" in text and "does it offer PLAIN" in text
    assert PASSWORD not in text
    await p.close()
