"""Shared fixtures: brokers and topics for integration tests.

* ``kafka_bootstrap`` (session): ``host:port`` of the shared broker, taken from
  ``$AIOPRODUCER_TEST_BOOTSTRAP`` or a Tansu spawned once for the session.
* ``private_broker`` (function): a fresh, dedicated :class:`LocalBroker` that a
  test may pause, kill or restart.
* ``tansu_binary`` (session): path of the Tansu binary, for tests that build
  their own :class:`LocalBroker`.
* ``topic_factory`` (function): ``topic_factory(partitions=4, *, bootstrap=None,
  config=None) -> str`` creates a uniquely named topic and waits for its metadata.

Tests under ``tests/integration/`` are marked ``integration`` automatically.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from aioproducer.testing.local_broker import (
    BrokerBinaryUnavailable,
    LocalBroker,
    find_broker_binary,
)

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
    return report


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
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of the broker shared by the whole session."""
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if external:
        yield external
        return
    broker = LocalBroker(binary=_binary_or_fail()).start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def tansu_binary() -> str:
    """Path of the Tansu binary, for tests that drive :class:`LocalBroker` themselves.

    Skips like ``private_broker`` when an external broker is configured and the
    binary is missing.
    """
    return _binary_or_skip()


@pytest.fixture
def private_broker(request: pytest.FixtureRequest) -> Iterator[LocalBroker]:
    """A dedicated, started Tansu broker for destructive tests (pause/kill/restart).

    Its log file is deleted when the test passes and kept (path in the test's
    ``user_properties``) when it fails.
    """
    broker = LocalBroker(binary=_binary_or_skip()).start()
    request.node.user_properties.append(("tansu_log", str(broker.log_path)))
    try:
        yield broker
    finally:
        broker.stop()
        call_report = getattr(request.node, "_report_call", None)
        if call_report is not None and call_report.passed:
            broker.log_path.unlink(missing_ok=True)


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
