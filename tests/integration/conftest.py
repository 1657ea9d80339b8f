"""Fixtures shared by the integration tests on Apache Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_broker import KafkaBroker


@pytest.fixture(scope="session", params=[1, 2], ids=["tv1", "tv2"])
def txn_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, str]]:
    """(transaction.version, bootstrap) of a broker formatted with that level."""
    version = request.param
    request.getfixturevalue("kafka_libs")  # skips (fails in CI) without the jars
    workdir: Path = tmp_path_factory.mktemp(f"kafka-tv{version}")
    broker = KafkaBroker(
        workdir=workdir,
        features={"transaction.version": version},
        # Timed-out transactions are found within half a second (Kafka: every 10 s).
        properties={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    ).start()
    try:
        yield version, broker.bootstrap_servers
    finally:
        broker.stop()
