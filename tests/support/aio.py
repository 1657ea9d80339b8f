"""Async helpers for integration tests: bounded waits and a non-blocking verifier.

The verifier (confluent-kafka) blocks; running it in a thread keeps the event
loop, and with it the producer under test, alive while records are read back.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from aioproducer import RecordMetadata
from tests.support.verify import ConsumedRecord, count_records, read_records

__all__ = [
    "closed_port",
    "count_back",
    "gather_within",
    "read_back",
    "runs",
    "until",
    "within",
]

T = TypeVar("T")


async def within(aw: Awaitable[T], seconds: float, what: str = "operation") -> T:
    """Await ``aw`` for at most ``seconds``; a hang becomes a test failure, not a stuck run."""
    try:
        return await asyncio.wait_for(aw, seconds)
    except asyncio.TimeoutError:
        raise AssertionError(f"{what} did not finish within {seconds} s") from None


async def until(
    condition: Callable[[], bool], seconds: float, what: str = "condition", poll: float = 0.005
) -> None:
    """Poll ``condition`` until it holds, for at most ``seconds``.

    Waiting for the event a test needs, instead of sleeping a fixed time and
    hoping it happened, keeps the test right on a slow or busy machine.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        await asyncio.sleep(poll)


async def gather_within(
    futures: Iterable[Awaitable[Any]], seconds: float, what: str = "futures"
) -> list[Any]:
    """Gather with ``return_exceptions=True``, bounded by ``seconds``."""
    return await within(asyncio.gather(*futures, return_exceptions=True), seconds, what)


async def read_back(
    bootstrap: str, topic: str, expected: int, **kwargs: Any
) -> list[ConsumedRecord]:
    return await asyncio.to_thread(read_records, bootstrap, topic, expected, **kwargs)


async def count_back(bootstrap: str, topic: str, expected: int, **kwargs: Any) -> int:
    return await asyncio.to_thread(count_records, bootstrap, topic, expected, **kwargs)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def runs(metadata: Iterable[RecordMetadata]) -> list[list[RecordMetadata]]:
    """Split metadata (in send order) into maximal runs on the same partition."""
    out: list[list[RecordMetadata]] = []
    for md in metadata:
        if out and out[-1][-1].partition == md.partition:
            out[-1].append(md)
        else:
            out.append([md])
    return out
