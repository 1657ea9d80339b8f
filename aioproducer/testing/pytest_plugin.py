"""pytest fixtures for testing code that produces with aioproducer, against a mock cluster.

Installed with aioproducer and loaded by pytest through the ``pytest11`` entry
point, so no ``conftest.py`` is needed:

* ``kafka_cluster``: a started :class:`~aioproducer.testing.MockCluster`, one
  per test, stopped afterwards. Configure it with the marker
  ``@pytest.mark.kafka_cluster(brokers=3, default_partitions=4, ...)``; every
  keyword is passed to ``MockCluster``.
* ``producer``: a factory, ``await producer(**config) -> Producer``, returning a
  started producer bound to ``kafka_cluster``; every producer it made is closed
  at teardown.
* ``schema_registry``: a started in-memory Confluent Schema Registry
  (:class:`~aioproducer.testing.mock_schema_registry.MockSchemaRegistry`), its
  address in ``schema_registry.url``; needs the ``avro`` extra.

The fixtures are async and need pytest-asyncio (strict or auto mode). In
strict mode, mark the tests ``@pytest.mark.asyncio``.

Event loops: a producer belongs to the loop that started it, and the mock
cluster answers only while the loop that started it runs. The fixtures are
function-scoped, one cluster and its producers per test, and run on the loop
pytest-asyncio gives function-scoped fixtures (``asyncio_default_fixture_loop_scope``),
like the fixtures that use them. The tests must run on that same loop: keep
``asyncio_default_fixture_loop_scope`` equal to the tests' loop scope
(``function``, the tests' default, or e.g. ``session`` for both together with
``asyncio_default_test_loop_scope``). Called from a test on another loop,
``producer(...)`` fails the test saying so (the cluster would not answer). A
producer of your own shared by several tests, e.g. made in a module-scoped
fixture, must run with those tests on one loop:
``@pytest_asyncio.fixture(scope="module", loop_scope="module")`` with
``@pytest.mark.asyncio(loop_scope="module")`` on the tests; used from a test on
another loop it raises ProducerLoopError, and buffers nothing.

pytest imports this module in every run of any project that has aioproducer
installed, so it imports nothing heavy at module level: the mock cluster and the
producer are imported inside the fixtures.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from aioproducer import Producer
    from aioproducer.testing import MockCluster
    from aioproducer.testing.mock_schema_registry import MockSchemaRegistry

__all__ = ["ProducerFactory", "kafka_cluster", "producer", "schema_registry"]

MARKER = "kafka_cluster"
# Bound on closing each producer at teardown, so that a test that leaves records
# pending against a stalled broker fails them instead of hanging the session.
CLOSE_TIMEOUT = 10.0

_WRONG_LOOP = (
    "the 'producer' fixture (and its 'kafka_cluster') run on the event loop of this test's "
    "fixtures, but the test runs on another loop: the mock cluster would not answer, and the "
    "producer would belong to the wrong loop. Give the fixtures and the tests one loop scope: "
    "asyncio_default_fixture_loop_scope equal to the tests' loop_scope (the "
    "@pytest.mark.asyncio(loop_scope=...) marker, else asyncio_default_test_loop_scope, "
    "'function' by default)."
)

_MISSING_PYTEST_ASYNCIO = (
    "the aioproducer fixtures 'kafka_cluster' and 'producer' are async and need "
    "pytest-asyncio: pip install pytest-asyncio  (or: pip install 'aioproducer[test]')"
)

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - exercised only without pytest-asyncio
    pytest_asyncio = None  # type: ignore[assignment]  # None: the plugin says what to install


class ProducerFactory(Protocol):
    """The ``producer`` fixture: ``await producer(linger_ms=0, ...)``."""

    async def __call__(self, **config: Any) -> Producer: ...


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): options of the MockCluster behind the 'kafka_cluster' fixture "
        "(brokers=, default_partitions=, auto_create_topics=, ...)",
    )


def _cluster_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return {}
    if marker.args:
        raise pytest.UsageError(
            f"@pytest.mark.{MARKER} takes keyword arguments only "
            f"(brokers=..., default_partitions=...), got positional {marker.args!r}"
        )
    return dict(marker.kwargs)


if pytest_asyncio is not None:

    @pytest_asyncio.fixture
    async def kafka_cluster(request: pytest.FixtureRequest) -> AsyncIterator[MockCluster]:
        """A started in-process mock Kafka cluster, stopped after the test.

        Options come from ``@pytest.mark.kafka_cluster(...)`` (the closest one:
        a test's marker overrides its class's or module's).
        """
        # Imported here: the mock is only loaded by tests that use it.
        try:
            from aioproducer.testing import MockCluster
        except ImportError as exc:
            pytest.fail(
                f"the kafka_cluster fixture needs aioproducer.testing.mock, which cannot be "
                f"imported: {exc}",
                pytrace=False,
            )

        cluster = MockCluster(**_cluster_options(request))
        await cluster.start()
        try:
            yield cluster
        finally:
            await cluster.stop()

    @pytest_asyncio.fixture
    async def producer(kafka_cluster: MockCluster) -> AsyncIterator[ProducerFactory]:
        """Factory of started producers bound to ``kafka_cluster``; all closed at teardown.

        ``await producer(**config)`` takes :class:`~aioproducer.ProducerConfig`
        keywords; ``bootstrap_servers`` defaults to the cluster's. Called from
        a test on another event loop than the fixture's, it fails the test.
        """
        from aioproducer import Producer

        made: list[Producer] = []
        fixture_loop = asyncio.get_running_loop()

        async def make(**config: Any) -> Producer:
            if asyncio.get_running_loop() is not fixture_loop:
                pytest.fail(_WRONG_LOOP, pytrace=False)
            servers = config.pop("bootstrap_servers", kafka_cluster.bootstrap_servers)
            instance = Producer(servers, **config)
            await instance.start()
            made.append(instance)
            return instance

        try:
            yield make
        finally:
            # Newest first, and each one bounded: records still pending fail
            # with KafkaTimeoutError rather than blocking the teardown. One
            # failing close must not leave the others open.
            failure: BaseException | None = None
            for instance in reversed(made):
                try:
                    await instance.close(timeout=CLOSE_TIMEOUT)
                except Exception as exc:  # noqa: BLE001 - re-raised after the rest close
                    failure = failure or exc
            if failure is not None:
                raise failure

    @pytest_asyncio.fixture
    async def schema_registry() -> AsyncIterator[MockSchemaRegistry]:
        """A started in-memory Schema Registry on a loopback port (``.url``), stopped after."""
        try:
            from aioproducer.testing.mock_schema_registry import MockSchemaRegistry
        except ImportError as exc:
            pytest.fail(
                f"the schema_registry fixture needs aiohttp and fastavro "
                f"(pip install 'aioproducer[avro]'): {exc}",
                pytrace=False,
            )
        registry = MockSchemaRegistry()
        await registry.start()
        try:
            yield registry
        finally:
            await registry.stop()

else:  # pragma: no cover - exercised only without pytest-asyncio

    @pytest.fixture
    def kafka_cluster() -> None:
        """Unavailable: needs pytest-asyncio."""
        pytest.fail(_MISSING_PYTEST_ASYNCIO, pytrace=False)

    @pytest.fixture
    def producer() -> None:
        """Unavailable: needs pytest-asyncio."""
        pytest.fail(_MISSING_PYTEST_ASYNCIO, pytrace=False)

    @pytest.fixture
    def schema_registry() -> None:
        """Unavailable: needs pytest-asyncio."""
        pytest.fail(_MISSING_PYTEST_ASYNCIO, pytrace=False)
