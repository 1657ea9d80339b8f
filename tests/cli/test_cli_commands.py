"""The ``aioproducer`` commands run as subprocesses against the in-process mock cluster.

The mock cluster keeps serving while the test awaits the subprocess (asyncio
subprocess, same event loop), and ``kafka_cluster.records()`` shows what the
command really wrote.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import pytest

from aioproducer.cli.common import parse_properties_file
from aioproducer.cli.perf import LatencyStats, percentile
from aioproducer.testing import MockCluster
from tests.support.aio import closed_port, within
from tests.support.cli import run_cli

pytestmark = [pytest.mark.kafka_cluster(brokers=2, default_partitions=3)]


# -- perf -------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("bulk", [False, True], ids=["per-record", "bulk"])
async def test_perf_produces_every_record_and_prints_a_json_summary(
    kafka_cluster: MockCluster, bulk: bool
) -> None:
    code, out, err = await run_cli(
        "perf",
        "--topic",
        "perf",
        "--num-records",
        "5000",
        "--record-size",
        "64",
        "--bootstrap-server",
        kafka_cluster.bootstrap_servers,
        "--json",
        "--producer-property",
        "linger.ms=2",
        *(["--bulk", "--bulk-size", "700"] if bulk else []),
    )
    assert code == 0, err
    summary = json.loads(out)
    assert summary["records"] == 5000 and summary["errors"] == 0
    assert summary["p50_ms"] <= summary["p99_ms"] <= summary["p999_ms"] <= summary["max_latency_ms"]
    records = kafka_cluster.records("perf")
    assert len(records) == 5000
    assert {len(r.value) for r in records} == {64}
    assert all(r.value.isalpha() and r.value.isupper() for r in records[:100])


@pytest.mark.asyncio
async def test_perf_prints_progress_lines_and_honours_the_throughput_cap(
    kafka_cluster: MockCluster,
) -> None:
    code, out, err = await run_cli(
        "perf",
        "--topic",
        "capped",
        "--num-records",
        "600",
        "--record-size",
        "10",
        "--throughput",
        "1000",
        "--reporting-interval",
        "150",
        "--bootstrap-server",
        kafka_cluster.bootstrap_servers,
    )
    assert code == 0, err
    lines = out.strip().splitlines()
    progress = re.compile(
        # "n/a" latencies: a window in which no record completed (a busy host can stall one).
        r"\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), (?:[\d.]+|n/a) ms avg latency, "
        r"(?:[\d.]+|n/a) ms max latency\.$"
    )
    assert len(lines) >= 3 and all(progress.match(line) for line in lines[:-1]), out
    assert re.match(
        r"600 records sent, .* ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, [\d.]+ ms 99\.9th\.$",
        lines[-1],
    ), lines[-1]
    rate = float(lines[-1].split(" records/sec")[0].split(", ")[1])
    assert rate <= 1000 * 1.05  # a cap, not a target: never above it
    assert len(kafka_cluster.records("capped")) == 600


@pytest.mark.asyncio
async def test_perf_takes_payloads_from_a_file_and_properties_from_a_file(
    kafka_cluster: MockCluster, tmp_path: Path
) -> None:
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\n\ngamma\n")
    config = tmp_path / "producer.properties"
    config.write_text("# a comment\nlinger.ms = 1\ncompression.type: lz4\nacks=all\n")
    code, _out, err = await run_cli(
        "perf",
        "--topic",
        "file",
        "--num-records",
        "300",
        "--payload-file",
        str(payloads),
        "--producer-config",
        str(config),
        "--bootstrap-server",
        kafka_cluster.bootstrap_servers,
    )
    assert code == 0, err
    values = {r.value for r in kafka_cluster.records("file")}
    assert values == {b"alpha", b"beta", b"gamma"}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--producer-property", "linger.mss=5"], "did you mean 'linger.ms'"),
        (["--producer-property", "linger.ms"], "must look like name=value"),
        (["--producer-config", "/nonexistent/p.properties"], "cannot read /nonexistent"),
        (["--throughput", "0"], "--throughput must be > 0 or -1"),
        (["--num-records", "0"], "--num-records must be > 0, got 0"),
    ],
)
async def test_perf_usage_errors_exit_2_naming_the_problem(
    kafka_cluster: MockCluster, args: list[str], message: str
) -> None:
    kafka_cluster.create_topic("bad", 1)
    code, _out, err = await run_cli(
        "perf",
        "--topic",
        "bad",
        "--num-records",
        "10",
        "--record-size",
        "10",
        "--bootstrap-server",
        kafka_cluster.bootstrap_servers,
        *args,
    )
    assert code == 2
    assert message in err
    assert kafka_cluster.records("bad") == []


@pytest.mark.asyncio
async def test_perf_and_produce_exit_3_when_the_cluster_is_unreachable() -> None:
    address = f"127.0.0.1:{closed_port()}"
    code, _out, err = await run_cli(
        "perf",
        "--topic",
        "t",
        "--num-records",
        "10",
        "--record-size",
        "10",
        "--bootstrap-server",
        address,
        "--producer-property",
        "max.block.ms=500",
    )
    assert code == 3 and "cannot reach the cluster" in err
    code, _out, err = await run_cli(
        "produce", "-b", address, "-t", "t", "--property", "max.block.ms=500", stdin=b"x\n"
    )
    assert code == 3 and "cannot reach the cluster" in err


# -- produce ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_produce_sends_one_record_per_line_with_keys_and_headers(
    kafka_cluster: MockCluster,
) -> None:
    lines = b"user-1:first\nuser-2:second:with colon\nuser-1:third\r\n:empty key\nuser-3:"
    code, _out, err = await run_cli(
        "produce",
        "-b",
        kafka_cluster.bootstrap_servers,
        "-t",
        "lines",
        "-K",
        ":",
        "-H",
        "source=cli",
        "-H",
        "trace=a=b",
        stdin=lines,
    )
    assert code == 0, err
    assert "delivered 5 record(s) to 'lines'" in err
    records = kafka_cluster.records("lines")
    got = sorted((r.key, r.value) for r in records)
    assert got == sorted(
        [
            (b"user-1", b"first"),
            (b"user-2", b"second:with colon"),
            (b"user-1", b"third"),
            (b"", b"empty key"),
            (b"user-3", b""),
        ]
    )
    assert all(r.headers == [("source", b"cli"), ("trace", b"a=b")] for r in records)
    by_key = {r.key: r.partition for r in records}
    assert len({r.partition for r in records if r.key == b"user-1"}) == 1
    assert by_key  # keyed records land where the Java partitioner puts them (tested elsewhere)


@pytest.mark.asyncio
async def test_produce_reads_files_in_order_to_one_partition(
    kafka_cluster: MockCluster, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(b"1\n2\n3\n")
    second.write_bytes(b"4\n5")
    code, _out, err = await run_cli(
        "produce",
        "-b",
        kafka_cluster.bootstrap_servers,
        "-t",
        "files",
        "-p",
        "2",
        str(first),
        "-",
        str(second),
        stdin=b"stdin-line\n",
    )
    assert code == 0, err
    records = kafka_cluster.records("files")
    assert [r.value for r in records] == [b"1", b"2", b"3", b"stdin-line", b"4", b"5"]
    assert {r.partition for r in records} == {2}


@pytest.mark.asyncio
async def test_produce_stops_at_the_first_failed_record(kafka_cluster: MockCluster) -> None:
    lines = b"k1:v1\nk2:v2\nno separator here\nk4:v4\nk5:v5\n"
    code, _out, err = await run_cli(
        "produce", "-b", kafka_cluster.bootstrap_servers, "-t", "stops", "-K", ":", stdin=lines
    )
    assert code == 1
    assert "record at stdin:3 failed: no key separator ':'" in err
    assert "delivered 2 record(s) to 'stops'; 1 failed" in err
    assert sorted(r.value for r in kafka_cluster.records("stops")) == [b"v1", b"v2"]


@pytest.mark.asyncio
async def test_produce_continue_on_error_reports_each_failure(kafka_cluster: MockCluster) -> None:
    kafka_cluster.create_topic("goes-on", 1)
    lines = b"k1:v1\nbad\nk3:v3\nalso bad\nk5:v5\n"
    code, _out, err = await run_cli(
        "produce",
        "-b",
        kafka_cluster.bootstrap_servers,
        "-t",
        "goes-on",
        "-K",
        ":",
        "--continue-on-error",
        stdin=lines,
    )
    assert code == 1
    assert "stdin:2 failed" in err and "stdin:4 failed" in err
    assert "delivered 3 record(s) to 'goes-on'; 2 failed" in err
    assert sorted(r.value for r in kafka_cluster.records("goes-on")) == [b"v1", b"v3", b"v5"]


@pytest.mark.asyncio
async def test_produce_reports_a_record_the_cluster_refuses(kafka_cluster: MockCluster) -> None:
    from aioproducer import errors

    kafka_cluster.create_topic("refused", 1)
    kafka_cluster.fail_produce("refused", 0, errors.TopicAuthorizationFailedError.code)
    code, _out, err = await run_cli(
        "produce",
        "-b",
        kafka_cluster.bootstrap_servers,
        "-t",
        "refused",
        "--property",
        "linger.ms=0",
        stdin=b"one\n",
    )
    assert code == 1
    assert "record at stdin:1 failed" in err and "authoriz" in err.lower()
    assert "delivered 0 record(s)" in err


@pytest.mark.asyncio
async def test_produce_to_a_partition_out_of_range_fails_clearly(
    kafka_cluster: MockCluster,
) -> None:
    kafka_cluster.create_topic("small", 2)
    code, _out, err = await run_cli(
        "produce", "-b", kafka_cluster.bootstrap_servers, "-t", "small", "-p", "5", stdin=b"x\n"
    )
    assert code == 1
    assert "partition 5 is not in the range [0...2)" in err


# -- help and pure parts ----------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("command", ["perf", "produce", "broker", "mock-broker"])
async def test_every_command_documents_its_exit_codes(command: str) -> None:
    code, out, _err = await run_cli(command, "--help")
    assert code == 0
    assert "exit codes" in out


def test_java_properties_files_are_parsed_like_java(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_text(
        "# comment\n! also a comment\n\n  linger.ms=5\nacks : all\nclient.id my client\n"
        "compression.type=\\\n    zstd\nempty=\n"
    )
    assert parse_properties_file(path) == {
        "linger.ms": "5",
        "acks": "all",
        "client.id": "my client",
        "compression.type": "zstd",
        "empty": "",
    }


def test_latency_percentiles_use_the_nearest_rank() -> None:
    values = list(range(1, 1001))
    assert percentile(values, 0.5) == 500
    assert percentile(values, 0.99) == 990
    assert percentile(values, 0.999) == 999
    assert percentile([7.0], 0.999) == 7.0
    stats = LatencyStats(now=0.0)
    for ms in (1.0, 2.0, 3.0):
        stats.record(ms, 10, None)
    stats.record(9.0, 10, RuntimeError("x"))
    stats.record_chunk(5.0, 2, 20, 1, RuntimeError("y"))
    summary = stats.summary(now=1.0)
    assert summary["records"] == 5 and summary["errors"] == 2
    assert summary["max_latency_ms"] == 5.0 and summary["records_per_sec"] == 5.0
    window = stats.window(now=0.5)
    assert window["records"] == 5 and window["avg_latency_ms"] == pytest.approx(16 / 5)


@pytest.mark.asyncio
async def test_perf_interrupted_reports_what_was_delivered_and_exits_130(
    kafka_cluster: MockCluster,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aioproducer.cli", "perf", "--topic", "stopped",
        "--num-records", "1000000", "--record-size", "10", "--throughput", "500", "--json",
        "--reporting-interval", "200",
        "--bootstrap-server", kafka_cluster.bootstrap_servers,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        progress = await within(proc.stderr.readline(), 30, "the first progress line")
        assert b"records sent" in progress  # producing, with the signal handlers in place
        proc.send_signal(signal.SIGINT)
        out, err = await within(proc.communicate(), 30, "perf after SIGINT")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert 0 < summary["records"] < 1_000_000 and summary["errors"] == 0
    assert len(kafka_cluster.records("stopped")) == summary["records"]


@pytest.mark.asyncio
async def test_perf_exits_1_when_the_buffer_stays_full(kafka_cluster: MockCluster) -> None:
    from aioproducer.protocol.apis import PRODUCE

    kafka_cluster.delay_responses(20, api_key=PRODUCE.key)  # acknowledgements stop coming
    code, out, err = await run_cli(
        "perf", "--topic", "full", "--num-records", "100000", "--record-size", "100",
        "--bootstrap-server", kafka_cluster.bootstrap_servers,
        "--producer-property", "buffer.memory=20000", "--producer-property", "max.block.ms=300",
        "--producer-property", "batch.size=2000",
    )  # fmt: skip
    assert code == 1, err
    assert "300 ms" in err  # the bound that was reached
    assert "records sent" in out  # the summary still tells what was delivered
