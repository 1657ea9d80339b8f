"""KIP-951 leader hints: the Produce v10 tagged fields, read and applied to a snapshot."""

from __future__ import annotations

import uuid

from aioproducer.engine.produce_request import leader_hints
from aioproducer.net.cluster import BrokerInfo, ClusterSnapshot
from aioproducer.protocol.generated import MetadataResponse, ProduceResponse
from aioproducer.protocol.generated._wire import ZERO_UUID
from aioproducer.protocol.generated.metadata import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from aioproducer.protocol.generated.produce import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    TopicProduceResponse,
)

NOT_LEADER = 6
TOPIC_ID = uuid.uuid4()


def _response(
    version: int, *, hint: tuple[int, int] | None, code: int = NOT_LEADER
) -> ProduceResponse:
    part = PartitionProduceResponse(index=0, error_code=code, base_offset=-1)
    if hint is not None:
        part.current_leader = LeaderIdAndEpoch(*hint)
    body = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="t", partition_responses=[part, PartitionProduceResponse(index=1)]
            )
        ],
        node_endpoints=[NodeEndpoint(node_id=7, host="h7", port=9097, rack="r")]
        if version >= 10
        else [],
    )
    return ProduceResponse.decode(body.encode(version), version)


def test_produce_v10_carries_the_current_leader_and_its_address() -> None:
    msg = _response(10, hint=(7, 3))
    assert leader_hints(msg) == ({("t", 0): (7, 3)}, [BrokerInfo(7, "h7", 9097, "r")])
    # A tagged field at its default is not written, and reads back as the default.
    assert msg.responses[0].partition_responses[1].current_leader == LeaderIdAndEpoch(-1, -1)


def test_older_versions_and_answers_without_a_leader_give_no_hint() -> None:
    assert leader_hints(_response(9, hint=None)) == ({}, [])
    assert leader_hints(_response(10, hint=None)) == ({}, [])
    assert leader_hints(_response(10, hint=(-1, -1))) == ({}, [])
    # Only a refusal for leadership reasons says where the leader went.
    assert leader_hints(_response(10, hint=(7, 3), code=19)) == ({}, [])


def test_unknown_tags_beside_known_ones_are_skipped() -> None:
    # A v10 body followed by a tagged section holding an unknown tag 9 and the
    # node endpoints (tag 0): tags may come in any count, and unknown ones must
    # not disturb the known.
    out = bytearray(ProduceResponse(throttle_time_ms=5).encode(10))
    assert out[-1] == 0  # no tagged fields at the top level
    out[-1:] = b"\x02" + b"\x09\x02zz" + b"\x00\x01\x01"  # tag 9 (2 bytes), tag 0: empty array
    msg = ProduceResponse.decode(bytes(out), 10)
    assert msg.throttle_time_ms == 5 and msg.node_endpoints == []


def _metadata(leader: int, epoch: int, topic_id: uuid.UUID | None = TOPIC_ID) -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=n, host="h", port=9000 + n) for n in (1, 2)],
        topics=[
            MetadataResponseTopic(
                name="t",
                topic_id=topic_id or ZERO_UUID,
                partitions=[
                    MetadataResponsePartition(
                        partition_index=0, leader_id=leader, leader_epoch=epoch
                    )
                ],
            )
        ],
    )


def _snapshot(leader: int = 1, epoch: int = 4) -> ClusterSnapshot:
    return ClusterSnapshot.from_response(_metadata(leader, epoch), now=1.0)


def test_a_newer_hint_moves_the_leader_an_older_one_does_not() -> None:
    snap = _snapshot(leader=1, epoch=4)
    moved = snap.with_leaders({("t", 0): (2, 5)})
    assert moved.leader_for("t", 0) == 2 and moved.topics["t"].partitions[0].leader_epoch == 5
    assert snap.leader_for("t", 0) == 1  # snapshots are not changed in place
    assert snap.with_leaders({("t", 0): (2, 4)}) is snap  # not newer
    assert moved.with_leaders({("t", 0): (1, 4)}) is moved  # a stale answer
    assert snap.with_leaders({("other", 0): (2, 9), ("t", 3): (2, 9)}) is snap  # unknown


def test_a_hint_naming_an_unknown_broker_needs_its_address() -> None:
    snap = _snapshot(leader=1, epoch=4)
    assert snap.with_leaders({("t", 0): (7, 5)}) is snap
    moved = snap.with_leaders({("t", 0): (7, 5)}, [BrokerInfo(7, "h7", 9097)])
    assert moved.leader_for("t", 0) == 7
    assert moved.brokers[7] == BrokerInfo(7, "h7", 9097)
    assert moved.topics["t"].available == (0,)


def test_a_lagging_metadata_answer_does_not_move_a_leader_back() -> None:
    hinted = _snapshot(leader=1, epoch=4).with_leaders({("t", 0): (2, 5)})
    # A broker whose metadata has not seen epoch 5 yet answers epoch 4.
    refreshed = ClusterSnapshot.from_response(_metadata(1, 4), now=2.0, previous=hinted)
    assert refreshed.leader_for("t", 0) == 2
    newer = ClusterSnapshot.from_response(_metadata(1, 6), now=3.0, previous=refreshed)
    assert newer.leader_for("t", 0) == 1
    # The topic was deleted and created again: its epochs start anew.
    again = ClusterSnapshot.from_response(_metadata(1, 0, uuid.uuid4()), now=4.0, previous=newer)
    assert again.leader_for("t", 0) == 1 and again.topics["t"].partitions[0].leader_epoch == 0
    # Without topic ids (older brokers) an answer is taken as it is.
    plain = ClusterSnapshot.from_response(_metadata(2, 9, None), now=1.0)
    assert ClusterSnapshot.from_response(_metadata(1, 0, None), 2.0, plain).leader_for("t", 0) == 1
