"""Capture transactional producer sessions (KIP-98) against Tansu (see README.md).

One run per client, each saved as ``<client>_transactional.frames``:

1. ``init_transactions`` (FindCoordinator for the transactional id, then
   InitProducerId);
2. a committed transaction: records to partitions 0 and 1 of ``golden-txn``
   (AddPartitionsToTxn, Produce), consumer offsets folded in with
   ``send_offsets_to_transaction`` (AddOffsetsToTxn, FindCoordinator for the
   group, TxnOffsetCommit), then ``commit_transaction`` (EndTxn committed);
3. an aborted transaction: one record to partition 0, ``abort_transaction``.

Each step's outcome (or the error it raised) is written to the file's
comments, so a capture against a broker that refuses a call still documents
what happened.

    .venv/bin/python -m tests.golden.capture_transactional
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
import kafka
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KafkaTopicPartition

from tests.golden.capture_golden import (
    BASE_TS,
    HERE,
    create_topic,
    librdkafka_client_name,
    settle,
    tansu_behind_proxy,
)
from tests.tools.capture_proxy import ThreadedCaptureProxy, save_frames

TOPIC = "golden-txn"
GROUP = "golden-txn-group"
TRANSACTIONAL_ID = "golden-txn-id"
STEP_TIMEOUT = 20.0

# (partition, timestamp, key, value)
Row = tuple[int, int, bytes | None, bytes]

# The committed transaction's records, then the aborted one's.
COMMITTED: list[Row] = [
    (0, BASE_TS, b"k0", b"committed-0"),
    (1, BASE_TS + 1, b"k1", b"committed-1"),
    (0, BASE_TS + 2, b"k2", b"committed-2"),
    (1, BASE_TS + 3, None, b"committed-3"),
]
ABORTED: list[Row] = [(0, BASE_TS + 10, b"k4", b"aborted-4")]
# Offsets "consumed" by the group, committed inside the first transaction.
OFFSETS = [(TOPIC, 0, 5), (TOPIC, 1, 7)]


def _step(log: list[str], name: str, call: Callable[[], Any]) -> bool:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - recorded in the capture, and the run goes on
        log.append(f"step {name}: FAILED {type(exc).__name__}: {exc}")
        print(f"{name}: {exc!r}", file=sys.stderr)
        return False
    log.append(f"step {name}: ok")
    return True


def _librdkafka(proxy: ThreadedCaptureProxy, bootstrap: str, log: list[str]) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "client.id": "golden-librdkafka",
        "transactional.id": TRANSACTIONAL_ID,
        "transaction.timeout.ms": 60000,
        "linger.ms": 50,
        "broker.address.family": "v4",
    }
    # Group metadata of a consumer that never subscribed: generation -1, no
    # member id. The object outlives the consumer, which is closed (and its
    # frames dropped) before the producer starts.
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "broker.address.family": "v4"}
    )
    metadata = consumer.consumer_group_metadata()
    consumer.close()
    settle(proxy)
    proxy.proxy.take()
    producer = confluent_kafka.Producer(config)
    offsets = [confluent_kafka.TopicPartition(t, p, o) for t, p, o in OFFSETS]

    def produce(records: list[Row]) -> None:
        for partition, ts, key, value in records:
            producer.produce(TOPIC, value=value, key=key, partition=partition, timestamp=ts)
        if producer.flush(STEP_TIMEOUT) != 0:
            raise RuntimeError("records not delivered")

    if _step(log, "init_transactions", lambda: producer.init_transactions(STEP_TIMEOUT)):
        _step(log, "begin_transaction", producer.begin_transaction)
        _step(log, "produce (partitions 0, 1)", lambda: produce(COMMITTED))
        _step(
            log,
            "send_offsets_to_transaction",
            lambda: producer.send_offsets_to_transaction(offsets, metadata, STEP_TIMEOUT),
        )
        if not _step(log, "commit_transaction", lambda: producer.commit_transaction(STEP_TIMEOUT)):
            _step(log, "abort_transaction", lambda: producer.abort_transaction(STEP_TIMEOUT))
        _step(log, "begin_transaction", producer.begin_transaction)
        _step(log, "produce (partition 0)", lambda: produce(ABORTED))
        _step(log, "abort_transaction", lambda: producer.abort_transaction(STEP_TIMEOUT))
    producer.flush(5)
    producer.close()
    return config


def _kafka_python(bootstrap: str, log: list[str]) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "client_id": "golden-kafka-python",
        "transactional_id": TRANSACTIONAL_ID + "-kp",
        "transaction_timeout_ms": 60000,
        "linger_ms": 50,
    }
    producer = kafka.KafkaProducer(**config)
    offsets = {KafkaTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for t, p, o in OFFSETS}

    def produce(records: list[Row]) -> None:
        futures = [
            producer.send(TOPIC, value=value, key=key, partition=partition, timestamp_ms=ts)
            for partition, ts, key, value in records
        ]
        producer.flush(STEP_TIMEOUT)
        for future in futures:
            future.get(timeout=STEP_TIMEOUT)

    if _step(log, "init_transactions", producer.init_transactions):
        _step(log, "begin_transaction", producer.begin_transaction)
        _step(log, "produce (partitions 0, 1)", lambda: produce(COMMITTED))
        _step(
            log,
            "send_offsets_to_transaction",
            lambda: producer.send_offsets_to_transaction(offsets, GROUP),
        )
        if not _step(log, "commit_transaction", producer.commit_transaction):
            _step(log, "abort_transaction", producer.abort_transaction)
        _step(log, "begin_transaction", producer.begin_transaction)
        _step(log, "produce (partition 0)", lambda: produce(ABORTED))
        _step(log, "abort_transaction", producer.abort_transaction)
    producer.close(timeout=10)
    return config


def _read_back(bootstrap: str) -> list[str]:
    """What the broker serves afterwards: records per isolation level, group offsets."""
    out = []
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"golden-reader-{isolation}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "broker.address.family": "v4",
            }
        )
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, 0) for p in (0, 1)])
        seen = []
        idle_until = time.monotonic() + 5
        while time.monotonic() < idle_until:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen.append(f"{msg.partition()}@{msg.offset()}={(msg.value() or b'').decode()}")
            idle_until = time.monotonic() + 3
        consumer.close()
        out.append(f"read back ({isolation}): {' '.join(sorted(seen)) or 'nothing'}")
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": GROUP, "broker.address.family": "v4"}
    )
    committed = consumer.committed(
        [confluent_kafka.TopicPartition(TOPIC, p) for p in (0, 1)], timeout=STEP_TIMEOUT
    )
    consumer.close()
    out.append(
        f"group {GROUP} committed offsets: "
        + " ".join(f"{tp.partition}={tp.offset}" for tp in committed)
    )
    return out


def main() -> None:
    with tansu_behind_proxy() as (proxy, bootstrap, _broker_port, version):
        create_topic(proxy, bootstrap, TOPIC, 2)
        common = [f"broker: {version} (memory storage), via capture proxy", f"topic: {TOPIC}"]

        log: list[str] = []
        config = _librdkafka(proxy, bootstrap, log)
        settle(proxy)
        frames = proxy.proxy.take()
        log += _read_back(bootstrap)
        settle(proxy)
        proxy.proxy.take()
        save_frames(
            HERE / "librdkafka_transactional.frames",
            frames,
            [f"client: {librdkafka_client_name()}", f"config: {json.dumps(config)}", *common, *log],
        )
        print("captured librdkafka transactional", *log, sep="\n  ", file=sys.stderr)

        log = []
        config = _kafka_python(bootstrap, log)
        settle(proxy)
        frames = proxy.proxy.take()
        log += _read_back(bootstrap)
        settle(proxy)
        proxy.proxy.take()
        client = f"client: kafka-python {kafka.__version__}"
        save_frames(
            HERE / "kafka_python_transactional.frames",
            frames,
            [client, f"config: {json.dumps(config)}", *common, *log],
        )
        print("captured kafka-python transactional", *log, sep="\n  ", file=sys.stderr)


if __name__ == "__main__":
    main()
