"""Fixtures of the TLS and SASL tests: a PKI generated once per session, and
``secure_kafka``, one Apache Kafka broker with a listener per security set-up
(see tests/support/secure_kafka.py), started only when a test asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.certs import Pki, make_pki
from tests.support.secure_kafka import SecureKafka, kafka_jars_present, start_secure_kafka


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """CA, server and client certificates issued for this session (never checked in)."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def _secure_kafka_session(
    tmp_path_factory: pytest.TempPathFactory, pki: Pki
) -> Iterator[SecureKafka]:
    missing = kafka_jars_present()
    if missing is not None:
        pytest.skip(missing)
    kafka = start_secure_kafka(tmp_path_factory.mktemp("secure-kafka"), pki)
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture
def secure_kafka(request: pytest.FixtureRequest, _secure_kafka_session: SecureKafka) -> SecureKafka:
    """The shared secure broker; a failing test gets its log tail in the report."""
    brokers = getattr(request.node, "_brokers", [])
    brokers.append(("secure Kafka broker", _secure_kafka_session.broker))
    request.node._brokers = brokers
    return _secure_kafka_session
