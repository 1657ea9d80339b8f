"""The pytest plugin (``kafka_cluster`` and ``producer`` fixtures), run in fresh pytest sessions.

Each test writes a small test module and runs pytest on it through pytester, in
pytest-asyncio's strict mode and in auto mode, and asserts the outcomes. The
README's example (``examples/test_order_service.py``) runs here too, so the
documented example cannot rot.
"""

from __future__ import annotations

import re
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "test_order_service.py"
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

# The same tests, written once for strict mode; auto mode drops the markers.
FIXTURE_TESTS = """
import asyncio

import pytest

from aioproducer import Producer, errors
from aioproducer.testing import MockCluster

made = {}


@pytest.mark.asyncio
async def test_default_cluster(kafka_cluster):
    assert isinstance(kafka_cluster, MockCluster)
    assert kafka_cluster.bootstrap_servers
    assert len(kafka_cluster.broker_ids) >= 1


@pytest.mark.asyncio
@pytest.mark.kafka_cluster(brokers=2, default_partitions=5)
async def test_marker_configures_the_cluster(kafka_cluster, producer):
    assert len(kafka_cluster.broker_ids) == 2
    p = await producer()
    assert await p.partitions_for("auto-created") == [0, 1, 2, 3, 4]


@pytest.mark.asyncio
async def test_producer_factory(kafka_cluster, producer):
    p = await producer(linger_ms=0)
    q = await producer(client_id="second", enable_idempotence=False)
    assert isinstance(p, Producer) and p is not q
    md = await asyncio.wait_for(p.send("t", b"one", key=b"k"), 10)
    await asyncio.wait_for(q.send("t", b"two", key=b"k"), 10)
    values = [r.value for r in kafka_cluster.records("t")]
    assert values == [b"one", b"two"]
    assert md.offset == 0
    made["producers"] = (p, q)
    made["address"] = kafka_cluster.bootstrap_servers.split(",")[0]


@pytest.mark.asyncio
async def test_previous_producers_and_cluster_were_closed():
    for p in made["producers"]:
        with pytest.raises(errors.ProducerClosedError):
            await p.enqueue("t", b"late")
    host, _, port = made["address"].rpartition(":")
    with pytest.raises(OSError):
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 5)
        writer.close()


@pytest.mark.kafka_cluster(brokers=1)
class TestClassMarker:
    @pytest.mark.asyncio
    async def test_class_marker(self, kafka_cluster):
        assert len(kafka_cluster.broker_ids) == 1

    @pytest.mark.asyncio
    @pytest.mark.kafka_cluster(brokers=3)
    async def test_closest_marker_wins(self, kafka_cluster):
        assert len(kafka_cluster.broker_ids) == 3
"""


def test_registered_as_a_pytest11_entry_point() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("aioproducer") == "aioproducer.testing.pytest_plugin", (
        "the pytest11 entry point is missing: reinstall the package (pip install -e .)"
    )


def test_fixtures_in_strict_mode(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_fixtures=FIXTURE_TESTS)
    result = pytester.runpytest("--asyncio-mode=strict", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)


def test_fixtures_in_auto_mode(pytester: pytest.Pytester) -> None:
    source = re.sub(r"^\s*@pytest\.mark\.asyncio\n", "", FIXTURE_TESTS, flags=re.MULTILINE)
    assert "mark.asyncio" not in source
    pytester.makeini(INI)
    pytester.makepyfile(test_fixtures=source)
    result = pytester.runpytest("-p", "asyncio", "--asyncio-mode=auto", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)


def test_marker_takes_keywords_only(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.asyncio
        @pytest.mark.kafka_cluster(3)
        async def test_positional(kafka_cluster):
            pass
        """
    )
    result = pytester.runpytest("--asyncio-mode=strict")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kafka_cluster takes keyword arguments only*"])


def test_marker_is_registered(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.kafka_cluster(**options)*"])


def test_plugin_loads_without_the_mock_package(pytester: pytest.Pytester) -> None:
    """Every pytest run imports the plugin: it must not need the mock until a fixture runs."""
    pytester.makeini(INI)
    # Loaded with -p before the entry points: makes the mock package unimportable.
    pytester.makepyfile(
        block_mock="""
        import sys
        sys.modules["aioproducer.testing.mock"] = None
        sys.modules["aioproducer.testing.mock.cluster"] = None
        """,
        test_plain="""
        import sys
        import pytest

        def test_plain():
            assert "aioproducer.testing.pytest_plugin" in sys.modules

        @pytest.mark.asyncio
        async def test_uses_cluster(kafka_cluster):
            pass
        """,
    )
    result = pytester.runpytest_subprocess("-p", "block_mock", "--asyncio-mode=strict")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*kafka_cluster fixture needs aioproducer.testing.mock*"])


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_readme_example_passes(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_order_service=EXAMPLE.read_text())
    result = pytester.runpytest(f"--asyncio-mode={mode}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_testing_guide_shows_the_example_file() -> None:
    guide = (ROOT / "docs" / "guides" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.DOTALL)
    assert EXAMPLE.read_text() in blocks, (
        "docs/guides/testing.md's example differs from examples/test_order_service.py"
    )


def test_readme_shows_the_example_file() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Testing your service", 1)
    assert len(section) == 2, "README.md lacks the 'Testing your service' section"
    blocks = re.findall(r"```python\n(.*?)```", section[1].split("\n## ", 1)[0], flags=re.DOTALL)
    assert EXAMPLE.read_text() in blocks, (
        "the README's example differs from examples/test_order_service.py"
    )
