"""Shared fixtures: brokers and topics for integration tests.

Apache Kafka is the reference broker: integration tests run against it.

* ``kafka_bootstrap`` (session): ``host:port`` of the shared broker, taken from
  ``$AIOPRODUCER_TEST_BOOTSTRAP`` or an Apache Kafka broker started once for the
  session (:class:`~tests.support.kafka_broker.KafkaBroker`).
* ``kafka_broker`` (session): that broker object (None when the bootstrap is external).
* ``private_broker`` (function): a fresh, dedicated Apache Kafka broker that a
  test may pause, kill or restart.
* ``tansu_bootstrap`` (session) and ``tansu_binary`` (session): the embedded
  Tansu broker, for the tests that keep it working as the README's default.
* ``topic_factory`` (function): ``topic_factory(partitions=4, *, bootstrap=None,
  config=None) -> str`` creates a uniquely named topic and waits for its metadata.

Without the Kafka jars (``tools/kafka/fetch.sh``) the tests that need a Kafka
broker skip, naming that command; in CI (``CI=true``) they fail instead. A
failed test that used a spawned broker gets the tail of that broker's log in
its report; whole logs stay under the session's temporary directory.

Tests under ``tests/integration/`` are marked ``integration`` automatically.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from aioproducer.embedded import (
    BrokerBinaryUnavailable,
    LocalBroker,
    find_broker_binary,
)
from tests.support.kafka_broker import KafkaBroker, KafkaJarsUnavailable, find_kafka_libs

BOOTSTRAP_ENV = "AIOPRODUCER_TEST_BOOTSTRAP"

_INTEGRATION_DIR = Path(__file__).parent / "integration"


class TopicFactory(Protocol):
    def __call__(
        self,
        partitions: int = 4,
        *,
        bootstrap: str | None = None,
        config: dict[str, str] | None = None,
        prefix: str | None = None,
    ) -> str: ...


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    # Remember each phase's outcome so fixtures can keep logs of failed tests only.
    report = yield
    setattr(item, f"_report_{report.when}", report)
    if report.failed:
        for label, broker in getattr(item, "_brokers", ()):
            report.sections.append((f"{label} log tail ({broker.log_path})", broker.read_log(6000)))
    return report


def _show_log_on_failure(request: pytest.FixtureRequest, label: str, broker: object) -> None:
    """Attach ``broker``'s log tail to the report of this test if it fails."""
    node = request.node
    brokers = getattr(node, "_brokers", [])
    brokers.append((label, broker))
    node._brokers = brokers


_FETCH_TRIED: list[str] = []  # the fetch's outcome, once per session


def _fetch_kafka_jars() -> str:
    """Run tools/kafka/fetch.sh once per session (Maven Central only); '' or why it failed."""
    if not _FETCH_TRIED:
        script = Path(__file__).parent.parent / "tools" / "kafka" / "fetch.sh"
        if shutil.which("mvn") is None:
            _FETCH_TRIED.append("Maven (mvn) is not installed")
        else:
            try:
                done = subprocess.run(
                    ["bash", str(script)], capture_output=True, text=True, timeout=900, check=False
                )
                _FETCH_TRIED.append(
                    "" if done.returncode == 0 else f"{script.name} failed: {done.stderr[-2000:]}"
                )
            except subprocess.TimeoutExpired:
                _FETCH_TRIED.append(f"{script.name} did not finish within 900 s")
    return _FETCH_TRIED[0]


def _kafka_libs_or_skip() -> None:
    try:
        find_kafka_libs()
        return
    except KafkaJarsUnavailable:
        why = _fetch_kafka_jars()  # the test command fetches what it needs
    try:
        find_kafka_libs()
    except KafkaJarsUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{exc} ({why}; CI must run on Apache Kafka)")
        pytest.skip(f"{exc} ({why})")


def _binary_or_fail() -> str:
    try:
        return find_broker_binary()
    except BrokerBinaryUnavailable as exc:
        pytest.fail(f"{exc}\n(or set {BOOTSTRAP_ENV}=host:port to use an existing broker)")


def _binary_or_skip() -> str:
    """Binary path; skip when an external broker is configured and no binary exists."""
    if os.environ.get(BOOTSTRAP_ENV, "").strip():
        try:
            return find_broker_binary()
        except BrokerBinaryUnavailable as exc:
            pytest.skip(
                f"needs a private Tansu broker to pause/kill, but {exc} "
                f"({BOOTSTRAP_ENV} is set, so only the shared broker is available)"
            )
    return _binary_or_fail()


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """The Apache Kafka jars (fetched on first use); skips (fails in CI) when unavailable."""
    _kafka_libs_or_skip()
    return find_kafka_libs()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker | None]:
    """The Apache Kafka broker shared by the session; ``None`` when the bootstrap is external."""
    if os.environ.get(BOOTSTRAP_ENV, "").strip():
        yield None
        return
    _kafka_libs_or_skip()
    broker = KafkaBroker(workdir=tmp_path_factory.mktemp("kafka-shared")).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: KafkaBroker | None) -> str:
    """``host:port`` of the broker shared by the whole session."""
    if kafka_broker is None:
        return os.environ[BOOTSTRAP_ENV].strip()
    return kafka_broker.bootstrap_servers


@pytest.fixture(autouse=True)
def _shared_broker_log(request: pytest.FixtureRequest) -> None:
    # A failing test that used the shared broker gets its log tail in the report.
    if "kafka_broker" in request.fixturenames or "kafka_bootstrap" in request.fixturenames:
        broker = request.getfixturevalue("kafka_broker")
        if broker is not None:
            _show_log_on_failure(request, "shared Kafka broker", broker)


@pytest.fixture(scope="session")
def tansu_binary() -> str:
    """Path of the Tansu binary, for tests that drive :class:`LocalBroker` themselves.

    Skips when an external broker is configured and the binary is missing.
    """
    return _binary_or_skip()


@pytest.fixture(scope="session")
def tansu_bootstrap(tansu_binary: str) -> Iterator[str]:
    """``host:port`` of a Tansu broker shared by the session (the embedded default)."""
    broker = LocalBroker(binary=tansu_binary).start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture
def private_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KafkaBroker]:
    """A dedicated, started Apache Kafka broker for destructive tests (pause/kill/restart).

    Its files live in the test's ``tmp_path``; the log tail is shown if the test fails.
    """
    _kafka_libs_or_skip()
    broker = KafkaBroker(workdir=tmp_path / "kafka").start()
    _show_log_on_failure(request, "private Kafka broker", broker)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def topic_factory(request: pytest.FixtureRequest) -> TopicFactory:
    """Create uniquely named topics; defaults to the session broker."""
    # Topic names allow [a-zA-Z0-9._-]; keep the test name for readable broker logs.
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:80].strip("-") or "t"

    def make(
        partitions: int = 4,
        *,
        bootstrap: str | None = None,
        config: dict[str, str] | None = None,
        prefix: str | None = None,
    ) -> str:
        # Imported here so unit tests run without confluent-kafka installed.
        from tests.support.verify import create_topic

        # Only start the shared broker when a test actually uses it.
        target = bootstrap if bootstrap is not None else request.getfixturevalue("kafka_bootstrap")
        name = f"{prefix or base}-{uuid.uuid4().hex[:10]}"
        return create_topic(target, name, partitions, config=config)

    return make
