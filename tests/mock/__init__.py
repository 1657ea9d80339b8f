"""Tests of the mock cluster, and a raw protocol client to drive it frame by frame.

:class:`RawClient` speaks to one mock broker with ``aioproducer.protocol``'s
codecs and nothing else (no retries, no metadata), so a test sees exactly what
the mock answered.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aioproducer.protocol.apis import APIS_BY_KEY, Api
from aioproducer.protocol.framing import (
    FrameDecoder,
    decode_response,
    encode_request,
    read_correlation_id,
)
from aioproducer.protocol.generated import ProduceRequest
from aioproducer.protocol.generated.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    TopicProduceData,
)
from aioproducer.protocol.records import RecordBatchBuilder

__all__ = ["RawClient", "batch_bytes"]

TIMEOUT = 5.0


def batch_bytes(
    values: list[bytes],
    *,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    transactional: bool = False,
    key: bytes | None = None,
) -> bytes:
    """A v2 record batch holding ``values``."""
    builder = RecordBatchBuilder(is_transactional=transactional)
    now = int(time.time() * 1000)
    for value in values:
        builder.append(now, key, value, [])
    return builder.build(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


class RawClient:
    """One connection to one broker; requests are sent and answered one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._decoder = FrameDecoder()
        self._frames: list[bytes] = []
        self._cid = 0

    @classmethod
    async def connect(cls, address: str) -> RawClient:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), TIMEOUT)
        return cls(reader, writer)

    def __repr__(self) -> str:
        return f"RawClient(peer={self.writer.get_extra_info('peername')}, next_cid={self._cid})"

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), TIMEOUT)
        except (ConnectionError, asyncio.TimeoutError):
            pass

    def send(self, api_key: int, version: int, body: Any) -> int:
        """Write a request (an instance of the API's generated request class); return its correlation id."""
        self._cid += 1
        api = APIS_BY_KEY[api_key]
        self.writer.write(encode_request(api, version, self._cid, "raw", body))
        return self._cid

    async def read_frame(self, timeout: float = TIMEOUT) -> bytes | None:
        """The next response frame, or None when the broker closed the connection."""
        while not self._frames:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                return None
            self._frames.extend(self._decoder.feed(data))
        return self._frames.pop(0)

    async def receive(
        self, api: Api[Any, Any], version: int, timeout: float = TIMEOUT
    ) -> tuple[int, Any]:
        frame = await self.read_frame(timeout)
        if frame is None:
            raise ConnectionError("connection closed by the broker")
        return read_correlation_id(frame), decode_response(api, version, frame)

    async def request(self, api_key: int, version: int, body: Any, timeout: float = TIMEOUT) -> Any:
        cid = self.send(api_key, version, body)
        got, response = await self.receive(APIS_BY_KEY[api_key], version, timeout)
        assert got == cid, f"response to correlation id {got}, expected {cid}"
        return response

    async def produce(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        acks: int = -1,
        transactional_id: str | None = None,
        version: int = 9,
    ) -> PartitionProduceResponse:
        """One partition's Produce; returns that partition's response."""
        body = ProduceRequest(
            transactional_id=transactional_id,
            acks=acks,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name=topic,
                    partition_data=[PartitionProduceData(index=partition, records=records)],
                )
            ],
        )
        response = await self.request(0, version, body)
        result: PartitionProduceResponse = response.responses[0].partition_responses[0]
        return result
