"""The SASL mechanism registry: one row makes a mechanism known to the client and the mock."""

from __future__ import annotations

import pytest

from aioproducer import Producer
from aioproducer.errors import ConfigurationError
from aioproducer.sasl import MECHANISMS, REGISTRY, Mechanism
from aioproducer.sasl.plain import PlainExchange
from aioproducer.testing import MockCluster
from aioproducer.testing.mock.sasl import (
    Authenticator,
    PlainAuthenticator,
    SaslServerConfig,
    new_authenticator,
)
from tests.support.aio import within


class ShoutExchange(PlainExchange):
    """A toy mechanism: PLAIN's message under another name, in upper case."""

    mechanism = "X-SHOUT"

    async def first(self) -> bytes:
        return (await super().first()).upper()


class ShoutAuthenticator(PlainAuthenticator):
    mechanism = "X-SHOUT"

    def step(self, token: bytes, now_ms: int) -> bytes:
        return super().step(token.lower(), now_ms)


SHOUT = Mechanism(
    "X-SHOUT",
    "password",
    lambda _m, user, password, _p: ShoutExchange(user or "", password or ""),
    f"{__name__}:ShoutAuthenticator",
)


@pytest.fixture
def shout(monkeypatch: pytest.MonkeyPatch) -> Mechanism:
    monkeypatch.setitem(REGISTRY, SHOUT.name, SHOUT)
    return SHOUT


def test_every_registered_mechanism_has_a_mock_server() -> None:
    assert MECHANISMS == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    for name in MECHANISMS:
        server = new_authenticator(name, SaslServerConfig([name], {"u": "p"}))
        assert isinstance(server, Authenticator)
        assert server.mechanism == name


@pytest.mark.asyncio
async def test_one_registry_row_is_enough_for_client_and_mock(shout: Mechanism) -> None:
    async with MockCluster(
        brokers=1, sasl_mechanisms=["X-SHOUT"], users={"alice": "secret"}
    ) as cluster:
        producer = Producer(
            cluster.bootstrap_servers,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="x-shout",
            sasl_plain_username="alice",
            sasl_plain_password="secret",
            linger_ms=2,
        )
        await within(producer.start(), 10, "start")
        try:
            metadata = await within(producer.send("t", b"v"), 10, "send")
        finally:
            await within(producer.close(), 10, "close")
    assert metadata.offset == 0
    assert cluster.sasl_authentications_by_mechanism().keys() == {"X-SHOUT"}
    assert cluster.sasl_failures == 0


def test_unknown_mechanism_lists_the_registered_ones(shout: Mechanism) -> None:
    with pytest.raises(ConfigurationError) as info:
        Producer("localhost:9092", security_protocol="SASL_SSL", sasl_mechanism="NOPE")
    assert "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, X-SHOUT" in str(info.value)
