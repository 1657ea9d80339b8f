"""The mock cluster's protocol behaviour, checked frame by frame with a raw client.

Each test sends hand-built requests and asserts the exact answer: metadata
and auto-creation, Produce validation, idempotent deduplication, producer id
fencing, and transaction state, i.e. what a Kafka broker would answer.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from aioproducer import errors
from aioproducer.protocol.apis import API_VERSIONS
from aioproducer.protocol.generated import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ApiVersionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from aioproducer.protocol.generated.add_partitions_to_txn import AddPartitionsToTxnTopic
from aioproducer.protocol.generated.metadata import MetadataRequestTopic
from aioproducer.protocol.generated.produce import PartitionProduceData, TopicProduceData
from aioproducer.protocol.generated.txn_offset_commit import (
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import SUPPORTED_VERSIONS
from tests.mock import RawClient, batch_bytes

NONE = 0
OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.code
DUPLICATE = errors.DuplicateSequenceNumberError.code
INVALID_EPOCH = errors.InvalidProducerEpochError.code
FENCED = errors.ProducerFencedError.code
INVALID_TXN_STATE = errors.InvalidTxnStateError.code


_VERSIONS_BODY = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def _topics(*names: str | None) -> list[MetadataRequestTopic]:
    return [MetadataRequestTopic(name=n) for n in names]


async def _client(cluster: MockCluster, broker: int = 0) -> RawClient:
    return await RawClient.connect(cluster.bootstrap_servers.split(",")[broker])


async def _init_pid(client: RawClient, transactional_id: str | None = None) -> tuple[int, int]:
    body = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60000)
    response = await client.request(22, 4, body)
    assert response.error_code == NONE, response
    return response.producer_id, response.producer_epoch


def _add_partitions(ids: dict[str, Any], *partitions: tuple[str, int]) -> AddPartitionsToTxnRequest:
    """AddPartitionsToTxn v0-3 (the client form, KIP-890) for ``(topic, partition)`` pairs."""
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=ids["transactional_id"],
        v3_and_below_producer_id=ids["producer_id"],
        v3_and_below_producer_epoch=ids["producer_epoch"],
        v3_and_below_topics=[
            AddPartitionsToTxnTopic(name=t, partitions=[p]) for t, p in partitions
        ],
    )


# -- lifecycle and topics -----------------------------------------------------


@pytest.mark.asyncio
async def test_lifecycle_topics_and_leaders() -> None:
    cluster = MockCluster(brokers=3, default_partitions=2)
    assert "stopped" in repr(cluster)
    await cluster.start()
    try:
        addresses = cluster.bootstrap_servers.split(",")
        assert len(addresses) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
        assert cluster.broker_ids == [0, 1, 2]
        cluster.create_topic("orders", partitions=6)
        assert cluster.partitions("orders") == [0, 1, 2, 3, 4, 5]
        assert [cluster.leader("orders", p) for p in range(6)] == [0, 1, 2, 0, 1, 2]
        with pytest.raises(ValueError):
            cluster.create_topic("orders")
        with pytest.raises(ValueError):
            cluster.create_topic("bad name!")
        with pytest.raises(KeyError):
            cluster.records("missing")
        assert cluster.records("orders") == []
        assert "running" in repr(cluster) and "topics=1" in repr(cluster)
    finally:
        await cluster.stop()
    port = int(addresses[0].rsplit(":", 1)[1])
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


@pytest.mark.asyncio
async def test_api_versions_and_kip511_fallback() -> None:
    async with MockCluster(brokers=1) as cluster:
        client = await _client(cluster)
        response = await client.request(18, 3, _VERSIONS_BODY)
        advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert response.error_code == NONE
        assert {k: advertised[k] for k in SUPPORTED_VERSIONS} == SUPPORTED_VERSIONS
        # A version newer than the broker knows: a v0-form answer with
        # UNSUPPORTED_VERSION and the ApiVersions range to retry with.
        client.send(18, 5, _VERSIONS_BODY)
        _cid, old = await client.receive(API_VERSIONS, 0)
        assert old.error_code == errors.UnsupportedVersionError.code
        assert {k.api_key: k.max_version for k in old.api_keys}[18] == 4
        await client.close()


@pytest.mark.asyncio
async def test_metadata_auto_create_and_errors() -> None:
    async with MockCluster(brokers=2, default_partitions=3) as cluster:
        client = await _client(cluster, 1)
        response = await client.request(
            3,
            12,
            MetadataRequest(topics=_topics("auto", "bad/name"), allow_auto_topic_creation=True),
        )
        assert [b.node_id for b in response.brokers] == [0, 1]
        created, bad = response.topics
        # As Kafka: the response that creates the topic says LEADER_NOT_AVAILABLE ...
        assert created.error_code == errors.LeaderNotAvailableError.code
        assert created.partitions == []
        assert bad.error_code == errors.InvalidTopicError.code
        assert cluster.partitions("auto") == [0, 1, 2]
        # ... and the next one has the partitions and their leaders.
        response = await client.request(3, 12, MetadataRequest(topics=_topics("auto")))
        (auto,) = response.topics
        assert auto.error_code == NONE and len(auto.partitions) == 3
        assert [p.leader_id for p in auto.partitions] == [
            cluster.leader("auto", i) for i in range(3)
        ]

        refused = await client.request(
            3, 12, MetadataRequest(topics=_topics("nope"), allow_auto_topic_creation=False)
        )
        assert refused.topics[0].error_code == errors.UnknownTopicOrPartitionError.code
        by_id = await client.request(
            3, 12, MetadataRequest(topics=[MetadataRequestTopic(topic_id=auto.topic_id, name=None)])
        )
        assert by_id.topics[0].name == "auto"
        everything = await client.request(3, 1, MetadataRequest(topics=None))
        assert [t.name for t in everything.topics] == ["auto"]
        await client.close()

    async with MockCluster(brokers=1, auto_create_topics=False) as cluster:
        client = await _client(cluster)
        response = await client.request(
            3, 4, MetadataRequest(topics=_topics("x"), allow_auto_topic_creation=True)
        )
        assert response.topics[0].error_code == errors.UnknownTopicOrPartitionError.code
        with pytest.raises(KeyError):
            cluster.partitions("x")
        await client.close()


# -- Produce --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_produce_offsets_leader_and_validation() -> None:
    async with MockCluster(brokers=2, default_partitions=2) as cluster:
        cluster.create_topic("t", partitions=2)  # partition 0 on broker 0, 1 on broker 1
        leader = await _client(cluster, 0)
        follower = await _client(cluster, 1)
        first = await leader.produce("t", 0, batch_bytes([b"a", b"b"]))
        second = await leader.produce("t", 0, batch_bytes([b"c"]), version=3)
        assert (first.error_code, first.base_offset, first.log_start_offset) == (NONE, 0, 0)
        assert (second.error_code, second.base_offset) == (NONE, 2)
        assert first.log_append_time_ms == -1
        assert [(r.offset, r.value) for r in cluster.records("t")] == [
            (0, b"a"),
            (1, b"b"),
            (2, b"c"),
        ]

        wrong = await follower.produce("t", 0, batch_bytes([b"x"]))
        assert wrong.error_code == errors.NotLeaderOrFollowerError.code
        missing = await leader.produce("t", 7, batch_bytes([b"x"]))
        assert missing.error_code == errors.UnknownTopicOrPartitionError.code
        corrupt = bytearray(batch_bytes([b"x"]))
        corrupt[-1] ^= 0xFF  # breaks the CRC
        assert (
            await leader.produce("t", 0, bytes(corrupt))
        ).error_code == errors.CorruptRecordError.code
        old_magic = bytearray(batch_bytes([b"x"]))
        old_magic[16] = 1
        assert (
            await leader.produce("t", 0, bytes(old_magic))
        ).error_code == errors.CorruptRecordError.code
        truncated = batch_bytes([b"x"])[:-3]
        assert (
            await leader.produce("t", 0, truncated)
        ).error_code == errors.CorruptRecordError.code
        two = batch_bytes([b"x"]) + batch_bytes([b"y"])
        assert (await leader.produce("t", 0, two)).error_code == errors.InvalidRecordError.code
        bad_acks = await leader.produce("t", 0, batch_bytes([b"x"]), acks=2)
        assert bad_acks.error_code == errors.InvalidRequiredAcksError.code
        assert len(cluster.records("t")) == 3  # none of the rejected batches was written

        # acks=0: written, never answered; the next request is answered in turn.
        fire = PartitionProduceData(index=0, records=batch_bytes([b"fire"]))
        leader.send(
            0,
            9,
            ProduceRequest(
                transactional_id=None,
                acks=0,
                timeout_ms=1000,
                topic_data=[TopicProduceData(name="t", partition_data=[fire])],
            ),
        )
        cid = leader.send(18, 0, ApiVersionsRequest())
        got, _ = await leader.receive(API_VERSIONS, 0)
        assert got == cid
        assert cluster.records("t")[-1].value == b"fire"
        assert cluster.request_count(0) == 10
        assert cluster.request_count(0, broker=1) == 1
        assert cluster.request_count(broker=0) == 10
        await leader.close()
        await follower.close()


@pytest.mark.asyncio
async def test_idempotent_dedup_and_sequence_checks() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        client = await _client(cluster)
        pid, epoch = await _init_pid(client)

        def batch(seq: int, n: int = 1, ep: int = epoch, producer: int = pid) -> bytes:
            return batch_bytes(
                [b"v%d" % (seq + i) for i in range(n)], producer_id=producer, epoch=ep, sequence=seq
            )

        assert (await client.produce("t", 0, batch(0, 2))).base_offset == 0
        assert (await client.produce("t", 0, batch(2))).base_offset == 2
        # A retry of either batch in the window: NONE and the original offset, not rewritten.
        retry = await client.produce("t", 0, batch(0, 2))
        assert (retry.error_code, retry.base_offset) == (NONE, 0)
        cluster.duplicate_error_code = DUPLICATE
        retry = await client.produce("t", 0, batch(2))
        assert (retry.error_code, retry.base_offset) == (DUPLICATE, 2)
        cluster.duplicate_error_code = NONE
        assert [r.sequence for r in cluster.records("t")] == [0, 1, 2]

        assert (await client.produce("t", 0, batch(5))).error_code == OUT_OF_ORDER
        # A producer the partition holds no state for may start at any sequence,
        # as on Kafka (its state may have been removed by retention); from then
        # on its sequences are checked.
        assert (await client.produce("t", 0, batch(4, producer=9999, ep=0))).error_code == NONE
        assert (
            await client.produce("t", 0, batch(0, producer=9999, ep=0))
        ).error_code == OUT_OF_ORDER
        assert (await client.produce("t", 0, batch(5, producer=9999, ep=0))).error_code == NONE
        assert [r.sequence for r in cluster.records("t")][-2:] == [4, 5]

        # Only the last 5 batches are remembered: an older retry is out of order.
        for seq in range(3, 9):
            assert (await client.produce("t", 0, batch(seq))).error_code == NONE
        assert (await client.produce("t", 0, batch(3))).error_code == OUT_OF_ORDER
        assert (await client.produce("t", 0, batch(8))).error_code == NONE  # still in the window
        assert len(cluster.records("t")) == 11

        # An idempotent producer asking again, even with its id and epoch (v3+),
        # gets a fresh id, as from Kafka's coordinator.
        fresh = await client.request(
            22,
            4,
            InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout_ms=1,
                producer_id=pid,
                producer_epoch=epoch,
            ),
        )
        assert fresh.producer_id != pid and fresh.producer_epoch == 0
        assert (
            await client.produce("t", 0, batch(0, producer=fresh.producer_id, ep=0))
        ).error_code == NONE
        # The old id still deduplicates its own retries after that.
        assert (await client.produce("t", 0, batch(9))).base_offset >= 0
        # A partition learns a bumped epoch from the batches it receives (an
        # idempotent producer's bump has no markers): the older one is fenced there.
        assert (await client.produce("t", 0, batch(10, ep=epoch + 1))).error_code == OUT_OF_ORDER
        assert (await client.produce("t", 0, batch(0, ep=epoch + 1))).error_code == NONE
        assert (await client.produce("t", 0, batch(10))).error_code == INVALID_EPOCH
        await client.close()


# -- transactions -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_transactions_commit_abort_and_fencing() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        client = await _client(cluster)
        pid, epoch = await _init_pid(client, "tx")
        ids = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch}

        async def end(committed: bool, version: int = 3) -> Any:
            return await client.request(26, version, EndTxnRequest(**ids, committed=committed))

        async def add() -> Any:
            return await client.request(24, 3, _add_partitions(ids, ("t", 0)))

        def txn_batch(seq: int, value: bytes, ep: int = epoch) -> bytes:
            return batch_bytes([value], producer_id=pid, epoch=ep, sequence=seq, transactional=True)

        # Not yet added to the transaction: rejected (Kafka 3.6+ verification).
        early = await client.produce("t", 0, txn_batch(0, b"early"), transactional_id="tx")
        assert early.error_code == INVALID_TXN_STATE
        assert (await end(True)).error_code == INVALID_TXN_STATE

        added = await add()
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            == NONE
        )
        await client.produce("t", 0, txn_batch(0, b"committed"), transactional_id="tx")
        assert cluster.records("t") == []
        assert [r.value for r in cluster.records("t", include_uncommitted=True)] == [b"committed"]
        assert (await end(True)).error_code == NONE
        # A retried EndTxn of the same outcome succeeds again.
        assert (await end(True)).error_code == NONE

        await add()
        aborted = await client.produce("t", 0, txn_batch(1, b"aborted"), transactional_id="tx")
        assert aborted.base_offset == 2  # offset 1 holds the commit marker
        assert (await end(False)).error_code == NONE
        visible = cluster.records("t")
        assert [(r.value, r.offset, r.transactional) for r in visible] == [(b"committed", 0, True)]
        assert [r.value for r in cluster.records("t", include_uncommitted=True)] == [
            b"committed",
            b"aborted",
        ]

        # Offsets: TxnOffsetCommit needs AddOffsetsToTxn first; committed with the txn.
        committed = TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=42, committed_metadata=None
        )
        offsets = TxnOffsetCommitRequest(
            **ids,
            group_id="g",
            topics=[TxnOffsetCommitRequestTopic(name="t", partitions=[committed])],
        )
        early_offsets = await client.request(28, 3, offsets)
        assert early_offsets.topics[0].partitions[0].error_code == INVALID_TXN_STATE
        assert (
            await client.request(25, 3, AddOffsetsToTxnRequest(**ids, group_id="g"))
        ).error_code == NONE
        assert (await client.request(28, 3, offsets)).topics[0].partitions[0].error_code == NONE
        assert (await end(True)).error_code == NONE
        assert cluster.coordinator.committed_offsets == {"g": {("t", 0): 42}}

        # A second session of the same transactional id fences the first.
        new_pid, new_epoch = await _init_pid(client, "tx")
        assert (new_pid, new_epoch) == (pid, epoch + 1)
        stale = await add()
        assert (
            stale.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            == FENCED
        )
        stale_v1 = await end(True, version=1)
        assert stale_v1.error_code == INVALID_EPOCH  # PRODUCER_FENCED exists from v2 (KIP-588)
        zombie = await client.produce("t", 0, txn_batch(2, b"zombie"), transactional_id="tx")
        assert zombie.error_code == INVALID_EPOCH
        retry_init = await client.request(
            22,
            4,
            InitProducerIdRequest(
                transactional_id="tx",
                transaction_timeout_ms=60000,
                producer_id=pid,
                producer_epoch=epoch,
            ),
        )
        assert retry_init.error_code == FENCED
        await client.close()


@pytest.mark.asyncio
async def test_init_producer_id_aborts_open_transaction() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        client = await _client(cluster)
        pid, epoch = await _init_pid(client, "tx")
        ids = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch}
        await client.request(24, 1, _add_partitions(ids, ("t", 0)))
        batch = batch_bytes([b"open"], producer_id=pid, epoch=epoch, sequence=0, transactional=True)
        assert (await client.produce("t", 0, batch, transactional_id="tx")).error_code == NONE
        pid, epoch = await _init_pid(
            client, "tx"
        )  # the new session aborts what the old one left open
        ids = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch}
        assert cluster.records("t") == []
        assert len(cluster.records("t", include_uncommitted=True)) == 1
        bad_timeout = await client.request(
            22, 4, InitProducerIdRequest(transactional_id="other", transaction_timeout_ms=10**7)
        )
        assert bad_timeout.error_code == errors.InvalidTransactionTimeoutError.code
        unknown = await client.request(24, 3, _add_partitions(ids, ("nope", 0), ("t", 0)))
        codes = [
            r.results_by_partition[0].partition_error_code
            for r in unknown.results_by_topic_v3_and_below
        ]
        # All or nothing: the known partition is not added either.
        assert codes == [
            errors.UnknownTopicOrPartitionError.code,
            errors.OperationNotAttemptedError.code,
        ]
        await client.close()


@pytest.mark.asyncio
async def test_find_coordinator_shapes() -> None:
    async with MockCluster(brokers=3) as cluster:
        client = await _client(cluster)
        ports = {
            int(a.rsplit(":", 1)[1]): i for i, a in enumerate(cluster.bootstrap_servers.split(","))
        }
        old = await client.request(10, 1, FindCoordinatorRequest(key="txn-a", key_type=1))
        assert old.error_code == NONE and ports[old.port] == old.node_id == cluster.coordinator_for(
            "txn-a"
        )
        new = await client.request(
            10, 4, FindCoordinatorRequest(key="", key_type=0, coordinator_keys=["g1", "g2"])
        )
        assert [c.key for c in new.coordinators] == ["g1", "g2"]
        assert all(ports[c.port] == c.node_id and c.error_code == NONE for c in new.coordinators)
        bad = await client.request(10, 3, FindCoordinatorRequest(key="x", key_type=7))
        assert bad.error_code == errors.InvalidRequestError.code
        await asyncio.wait_for(client.close(), 5)


# -- command line -------------------------------------------------------------------


def _produce_one(bootstrap: str) -> tuple[int, int]:
    import confluent_kafka

    delivered: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True}
    )
    producer.produce("cli-topic", b"hello", partition=1, on_delivery=on_delivery)
    assert producer.flush(10) == 0
    return delivered[0]


@pytest.mark.asyncio
async def test_cli_mock_broker_subprocess() -> None:
    import signal
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aioproducer.cli",
        "mock-broker",
        "--brokers",
        "2",
        "--port",
        "0",
        "--partitions",
        "2",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        addresses = line.split(",")
        assert len(addresses) == 2 and all(a.startswith("127.0.0.1:") for a in addresses), line
        partition, offset = await asyncio.wait_for(asyncio.to_thread(_produce_one, line), 30)
        assert (partition, offset) == (1, 0)
        proc.send_signal(signal.SIGINT)
        _out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err
        assert b"stopped" in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.asyncio
async def test_consecutive_ports_and_cli_arguments() -> None:
    from aioproducer.cli import main

    for _ in range(5):  # a free port whose successor may be taken: try another
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base >= 65535:
            continue
        cluster = MockCluster(brokers=2, base_port=base)
        try:
            await cluster.start()
        except OSError:
            continue
        try:
            assert cluster.bootstrap_servers == f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        finally:
            await cluster.stop()
        break
    else:
        pytest.fail("no two consecutive free ports found")
    assert main(["mock-broker", "--brokers", "0"]) == 2


def test_cli_mock_broker_takes_free_ports_and_names_a_taken_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from aioproducer.cli import main
    from aioproducer.cli.mock_broker import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    assert parser.parse_args(["mock-broker"]).port == 0  # free ports unless asked
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["mock-broker", "--brokers", "1", "--port", str(port)]) == 3
    err = capsys.readouterr().err
    assert f"a port of {port} is taken (a local Kafka?): leave out --port for free ports" in err
