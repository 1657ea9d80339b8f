"""The command's version, and the options spelled as Kafka's own tools spell them.

``kafka-producer-perf-test`` takes producer properties as ``--producer-props
k=v [k=v ...]`` (the cluster included, as ``bootstrap.servers``) and a file as
``--producer.config``; ``aioproducer perf`` accepts both, so a command line
written for Kafka's tool runs unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aioproducer
from aioproducer.testing import MockCluster
from tests.support.cli import run_cli

pytestmark = [pytest.mark.asyncio, pytest.mark.kafka_cluster(brokers=1, default_partitions=2)]


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


async def test_version_prints_the_package_version() -> None:
    code, out, err = await run_cli("--version")
    assert code == 0, err
    assert out.strip() == f"aioproducer {aioproducer.__version__}"


async def test_perf_takes_kafka_producer_props_and_producer_dot_config(
    kafka_cluster: MockCluster, tmp_path: Path
) -> None:
    config = tmp_path / "producer.properties"
    # Records of 200 bytes do not fit this: only the override below lets them through.
    config.write_text("max.request.size=100\nlinger.ms=1\n")
    code, _out, err = await run_cli(
        "perf",
        "--topic",
        "kafka-style",
        "--num-records",
        "500",
        "--record-size",
        "200",
        "--throughput",
        "-1",
        "--producer.config",
        str(config),
        "--producer-props",
        f"bootstrap.servers={kafka_cluster.bootstrap_servers}",
        "max.request.size=1048576",
        "acks=all",
    )
    assert code == 0, err
    assert "embedded broker" not in err  # bootstrap.servers named the cluster
    records = kafka_cluster.records("kafka-style")
    assert len(records) == 500
    assert {len(r.value) for r in records} == {200}


async def test_perf_producer_props_are_checked_like_other_properties(
    kafka_cluster: MockCluster,
) -> None:
    code, _out, err = await run_cli(
        "perf",
        "--topic",
        "t",
        "--num-records",
        "10",
        "--record-size",
        "10",
        "--bootstrap-server",
        kafka_cluster.bootstrap_servers,
        "--producer-props",
        "linger.ms=1",
        "lingr.ms=5",
    )
    assert code == 2
    assert "did you mean 'linger.ms'" in err


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
async def test_perf_summary_without_a_delivered_record_has_no_nan(
    kafka_cluster: MockCluster, as_json: bool
) -> None:
    # The first record is over max.request.size: refused at once, the run stops
    # and reports no latency, since none was measured.
    code, out, err = await run_cli(
        "perf",
        "--topic",
        "too-big",
        "--num-records",
        "5",
        "--record-size",
        "2000",
        "--bootstrap-server",
        kafka_cluster.bootstrap_servers,
        "--producer-property",
        "max.request.size=1000",
        *(["--json"] if as_json else []),
    )
    assert code == 1, err
    assert "larger than max_request_size (1000)" in err
    assert "nan" not in out.lower()
    if as_json:
        summary = _strict_json(out)
        assert summary["records"] == 0
        assert summary["p99_ms"] is None and summary["avg_latency_ms"] is None
    else:
        assert "0 records sent" in out
        assert "n/a ms avg latency" in out and "n/a ms 99th" in out
