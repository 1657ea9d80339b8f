"""Producers and pytest-asyncio's loop scopes, in fresh pytest sessions (pytester).

A fixture and a test may run on different event loops (pytest-asyncio's
``loop_scope``). A producer started in a module-scoped fixture and used from a
function-loop test must raise ProducerLoopError, buffering nothing; the
plugin's own fixtures run on the loop pytest-asyncio gives fixtures, whatever the
configured loop scopes: a test on the fixtures' loop passes, one on another
loop fails at once, saying why (not after ``max_block_ms`` of silence).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INI = (
    "[pytest]\nasyncio_default_fixture_loop_scope = {fixtures}\n"
    "asyncio_default_test_loop_scope = {tests}\n"
)

SHARED_PRODUCER = """
import asyncio

import pytest
import pytest_asyncio

from aioproducer import Producer, ProducerLoopError
from aioproducer.testing import MockCluster

BOUND = 30


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster():
    async with MockCluster(brokers=1) as mock:
        mock.create_topic("t", 1)
        yield mock


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(cluster):
    producer = Producer(cluster.bootstrap_servers, linger_ms=0)
    await producer.start()
    yield producer
    await asyncio.wait_for(producer.close(), BOUND)


@pytest.mark.asyncio(loop_scope="module")
async def test_1_on_the_fixture_loop(shared):
    await asyncio.wait_for(shared.send("t", b"first"), BOUND)


@pytest.mark.asyncio
async def test_2_on_a_function_loop(shared):
    with pytest.raises(ProducerLoopError, match="loop_scope"):
        await asyncio.wait_for(shared.send("t", b"stray"), BOUND)
    with pytest.raises(ProducerLoopError):
        await asyncio.wait_for(shared.send_many("t", [b"stray", b"stray"]), BOUND)
    with pytest.raises(ProducerLoopError):
        await asyncio.wait_for(shared.flush(), BOUND)
    with pytest.raises(ProducerLoopError, match="nothing was closed"):
        await asyncio.wait_for(shared.close(), BOUND)


@pytest.mark.asyncio(loop_scope="module")
async def test_3_nothing_stray_was_written(cluster, shared):
    await asyncio.wait_for(shared.flush(), BOUND)
    assert [r.value for r in cluster.records("t")] == [b"first"]
"""

PLUGIN_FIXTURES = """
import asyncio

import pytest


@pytest.mark.asyncio
async def test_on_the_default_loop(kafka_cluster, producer):
    p = await producer(max_block_ms=3000, linger_ms=0)
    await asyncio.wait_for(p.send("t", b"v"), 30)
    assert [r.value for r in kafka_cluster.records("t")] == [b"v"]


@pytest.mark.asyncio(loop_scope="module")
async def test_on_a_module_loop(kafka_cluster, producer):
    p = await producer(max_block_ms=3000, linger_ms=0)
    await asyncio.wait_for(p.send("t", b"v"), 30)
    assert [r.value for r in kafka_cluster.records("t")] == [b"v"]
"""


def test_a_module_fixture_producer_used_from_a_function_loop_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI.format(fixtures="function", tests="function"))
    pytester.makepyfile(test_shared=SHARED_PRODUCER)
    result = pytester.runpytest("--asyncio-mode=strict", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize(
    ("fixtures", "tests", "wrong"),
    [
        ("function", "function", "test_on_a_module_loop"),
        ("module", "function", "test_on_the_default_loop"),
        ("session", "session", "test_on_a_module_loop"),
    ],
)
def test_plugin_fixtures_used_from_another_loop_fail_the_test_saying_why(
    pytester: pytest.Pytester, fixtures: str, tests: str, wrong: str
) -> None:
    pytester.makeini(INI.format(fixtures=fixtures, tests=tests))
    pytester.makepyfile(test_plugin=PLUGIN_FIXTURES)
    result = pytester.runpytest("--asyncio-mode=strict", "-p", "no:cacheprovider", "-rf")
    # The test on the fixtures' loop passes; the other fails at once, saying why.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*_ {wrong} _*",
            "*fixture*but the test runs on another loop*asyncio_default_fixture_loop_scope*",
            f"FAILED test_plugin.py::{wrong} - Failed: the 'producer' fixt*",
        ]
    )
