"""The test infrastructure itself: broker launcher, fixtures and verifier."""

from __future__ import annotations

import os
import socket
import time

import pytest
from confluent_kafka import Producer

from tests.support.kafka_broker import KafkaBroker
from tests.support.verify import (
    TIMESTAMP_CREATE_TIME,
    count_records,
    partition_count,
    produce_with_librdkafka,
    read_records,
)

pytestmark = pytest.mark.integration


def _connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2.0):
        pass


def test_topic_factory_partitions(kafka_bootstrap: str, topic_factory) -> None:
    one = topic_factory(1)
    three = topic_factory(3)
    assert one != three
    assert partition_count(kafka_bootstrap, one) == 1
    assert partition_count(kafka_bootstrap, three) == 3


def test_read_records_round_trip(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(3)
    base_ts = 1_700_000_000_000
    sent = [
        {
            "key": f"k{i}".encode(),
            "value": f"v{i}".encode() * (i + 1),
            "headers": [("h1", f"x{i}".encode()), ("h2", b""), ("h1", b"dup")],
            "partition": i % 3,
            "timestamp": base_ts + i,
        }
        for i in range(30)
    ]
    sent.append({"key": None, "value": None, "partition": 0, "timestamp": base_ts + 99})
    delivered = produce_with_librdkafka(kafka_bootstrap, topic, sent)
    assert len(delivered) == len(sent)

    got = read_records(kafka_bootstrap, topic, expected=len(sent), timeout=30)
    assert len(got) == len(sent)
    assert {r.partition for r in got} == {0, 1, 2}
    by_key = {r.key: r for r in got}
    for i in range(30):
        rec = by_key[f"k{i}".encode()]
        assert rec.topic == topic
        assert rec.partition == i % 3
        assert rec.value == f"v{i}".encode() * (i + 1)
        assert rec.headers == [("h1", f"x{i}".encode()), ("h2", b""), ("h1", b"dup")]
        assert rec.timestamp_ms == base_ts + i
        assert rec.timestamp_type == TIMESTAMP_CREATE_TIME
    tombstone = by_key[None]
    assert tombstone.value is None and tombstone.headers == []
    # Offsets are dense per partition, in order.
    for p in range(3):
        offsets = [r.offset for r in got if r.partition == p]
        assert offsets == list(range(len(offsets)))

    # Only some partitions.
    only_p1 = read_records(kafka_bootstrap, topic, expected=10, partitions=[1], timeout=30)
    assert len(only_p1) == 10 and {r.partition for r in only_p1} == {1}
    # Asking for too few still reports the extras; asking for too many times out with what exists.
    assert len(read_records(kafka_bootstrap, topic, expected=5, timeout=30)) == len(sent)
    assert count_records(kafka_bootstrap, topic, expected=len(sent) + 5, timeout=3) == len(sent)


def test_pause_stalls_and_resume_recovers(private_broker: KafkaBroker, topic_factory) -> None:
    bs = private_broker.bootstrap_servers
    topic = topic_factory(1, bootstrap=bs)
    delivered: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        delivered.append(err)

    producer = Producer({"bootstrap.servers": bs, "linger.ms": 0, "acks": "all"})
    # Warm up so connections and metadata exist before the stall.
    producer.produce(topic, b"before", on_delivery=on_delivery)
    assert producer.flush(15) == 0
    assert delivered == [None]

    private_broker.pause()
    assert private_broker.is_paused
    producer.produce(topic, b"during", on_delivery=on_delivery)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        producer.poll(0.1)
    assert len(delivered) == 1, "a produce completed while the broker was paused"

    private_broker.resume()
    assert not private_broker.is_paused
    assert producer.flush(30) == 0
    assert delivered == [None, None]
    got = read_records(bs, topic, expected=2, timeout=30)
    assert sorted(r.value for r in got) == [b"before", b"during"]


def test_kill_refuses_connections_and_restart_reuses_port(private_broker: KafkaBroker) -> None:
    port = private_broker.port
    pid = private_broker.pid
    assert pid is not None
    private_broker.kill()
    assert not private_broker.is_running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(ConnectionRefusedError):
        _connect(port)

    private_broker.restart()
    assert private_broker.port == port
    assert private_broker.pid not in (None, pid)
    _connect(port)
    topic = "after-restart"
    produce_with_librdkafka(private_broker.bootstrap_servers, topic, [b"x"])
    assert count_records(private_broker.bootstrap_servers, topic, expected=1, timeout=30) == 1


def test_kafka_broker_start_stop_and_restart_keeps_the_log(kafka_libs, tmp_path) -> None:
    broker = KafkaBroker(workdir=tmp_path / "kafka", libs=kafka_libs).start()
    try:
        assert broker.is_running and broker.pid is not None
        topic = "kept"
        produce_with_librdkafka(broker.bootstrap_servers, topic, [b"a", b"b"])
        broker.stop()  # a controlled shutdown, within its bound
        assert not broker.is_running
        with pytest.raises(ConnectionRefusedError):
            _connect(broker.port)
        broker.start()
        # Unlike Tansu, Kafka keeps what it wrote across a restart.
        assert count_records(broker.bootstrap_servers, topic, expected=2, timeout=30) == 2
    finally:
        broker.stop()
    assert "started (kafka.server.KafkaRaftServer)" in broker.log_path.read_text()


def test_stop_of_a_paused_kafka_broker_is_bounded(private_broker: KafkaBroker) -> None:
    private_broker.pause()
    started = time.monotonic()
    private_broker.stop()
    assert time.monotonic() - started < private_broker.stop_timeout + 5
    assert not private_broker.is_running
