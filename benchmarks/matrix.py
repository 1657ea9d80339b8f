"""What the throughput benchmark runs: patterns, clients, and the default matrix of cases.

A *case* is one client in one pattern with one variant (value size,
idempotence, event loop). The default matrix measures every pattern with
100 B values, idempotence on and off, on the standard asyncio loop; 1 KiB
values only in patterns a and d (without kafka-python); uvloop only in patterns a,
c and d (aioproducer, aiokafka and the librdkafka callback bridge). That keeps the
full run (3 repeats of 200,000 records) within about 15 minutes on two cores.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

PATTERNS: dict[str, str] = {
    "a": "produce every record, keep its future (or delivery callback), then flush",
    "b": "produce every record, keep the futures, then wait for them in chunks of 1,000",
    "c": "1,000 concurrent tasks, each awaiting send() (the ack) in a loop",
    "d": "each client's bulk API",
}

CLIENTS = ("aioproducer", "aiokafka", "confluent", "confluent_bridge", "kafka_python", "java")

# The API each client uses in each pattern (absent: the client has none).
CLIENT_APIS: dict[str, dict[str, str]] = {
    "aioproducer": {
        "a": "`await enqueue()` per record, keep the futures, `await flush()`",
        "b": "`await enqueue()` per record, then `asyncio.gather` over 1,000 futures at a time",
        "c": "`await send()`",
        "d": "`enqueue_many()` with 10,000 values per call, then await each call's future",
    },
    "aiokafka": {
        "a": "`await send()` per record, keep the futures, `await flush()`",
        "b": "`await send()` per record, then `asyncio.gather` over 1,000 futures at a time",
        "c": "`await send_and_wait()`",
        "d": "`create_batch()` filled with `append()`, `send_batch()` to each partition in turn",
    },
    "confluent": {
        "a": "`produce(on_delivery=cb)` + `poll(0)` per record, then `flush()`",
        "b": "`produce(on_delivery=cb)` + `poll(0)` per record, then `poll()` until each next "
        "1,000 delivery reports arrived",
        "c": "`confluent_kafka.aio.AIOProducer`: `await (await produce())`; it resolves futures "
        "only when its next internal batch of 1,000 records goes to librdkafka or its 1 s "
        "buffer timer fires, so 1,000 tasks waiting on one record each mostly wait for the "
        "timer (3,000 records per run to keep the run short)",
        "d": "`produce()` + `poll(0)` per record, one producer-wide delivery callback, `flush()`",
    },
    "confluent_bridge": {
        "c": "classic `Producer`, a `poll()` thread, each delivery callback resolves an asyncio "
        "future via `call_soon_threadsafe`",
    },
    "kafka_python": {
        "a": "`send()` per record, keep the futures, `flush()`",
        "b": "`send()` per record, then `future.get()` 1,000 futures at a time",
    },
    "java": {
        "a": "Java `KafkaProducer.send(record, callback)` per record, then `flush()`",
        "b": "Java `KafkaProducer.send(record, callback)` per record, keep the `Future`s, then "
        "`get()` 1,000 at a time",
    },
}

# (client, pattern) pairs that run on an event loop; the others ignore --loop.
_SYNC = {("confluent", "a"), ("confluent", "b"), ("confluent", "d")}


def uses_loop(client: str, pattern: str) -> bool:
    return client not in ("kafka_python", "java") and (client, pattern) not in _SYNC


# confluent's AIOProducer resolves futures only when its next internal batch is
# handed to librdkafka or its 1 s buffer timer fires, so 1,000 tasks awaiting
# one record each reach about 1,000 records/s: a smaller count keeps the run short.
RECORD_CAPS: dict[tuple[str, str], int] = {("confluent", "c"): 3_000}

BASELINE_AIOKAFKA = "aiokafka"
BASELINE_LIBRDKAFKA = "confluent"


@dataclass(frozen=True)
class Variant:
    size: int
    idempotence: bool
    loop: str  # "asyncio", "uvloop", or "-" for a client that runs no event loop

    @property
    def label(self) -> str:
        loop = "" if self.loop in ("asyncio", "-") else f", {self.loop}"
        return f"{self.size} B, idem {'on' if self.idempotence else 'off'}{loop}"


@dataclass(frozen=True)
class Case:
    pattern: str
    client: str
    variant: Variant
    records: int


def _case(pattern: str, client: str, size: int, idem: bool, loop: str, records: int) -> Case:
    loop = loop if uses_loop(client, pattern) else "-"
    return Case(
        pattern,
        client,
        Variant(size, idem, loop),
        min(records, RECORD_CAPS.get((client, pattern), records)),
    )


def _grid(
    patterns: str,
    clients: tuple[str, ...],
    sizes: list[int],
    idems: list[bool],
    loops: list[str],
    records: int,
) -> list[Case]:
    out: list[Case] = []
    for pattern, client, size, idem, loop in itertools.product(
        patterns, clients, sizes, idems, loops
    ):
        if pattern not in CLIENT_APIS[client]:
            continue
        # A client without an event loop maps every loop to "-": the callers'
        # dict.fromkeys() keeps one such case, which then serves as a baseline.
        out.append(_case(pattern, client, size, idem, loop, records))
    return out


def default_matrix(
    records: int, clients: tuple[str, ...] = CLIENTS, patterns: str = "abcd"
) -> list[Case]:
    """The curated matrix (see the module docstring), restricted to ``clients``/``patterns``."""
    ad = "".join(p for p in "ad" if p in patterns)
    acd = "".join(p for p in "acd" if p in patterns)
    # kafka-python is the slowest client by far: 100 B only. confluent's
    # AIOProducer is bound by its 1 s timer, not the loop: asyncio only.
    no_kp = tuple(c for c in clients if c != "kafka_python")
    loop_clients = tuple(c for c in clients if c in ("aioproducer", "aiokafka", "confluent_bridge"))
    cases = (
        _grid(patterns, clients, [100], [True, False], ["asyncio"], records)
        + _grid(ad, no_kp, [1024], [True, False], ["asyncio"], records)
        + _grid(acd, loop_clients, [100], [True, False], ["uvloop"], records)
    )
    return list(dict.fromkeys(cases))  # no duplicates, first-seen order


def custom_matrix(
    records: int,
    clients: tuple[str, ...],
    patterns: str,
    sizes: list[int],
    idems: list[bool],
    loops: list[str],
) -> list[Case]:
    """Every combination of the given settings."""
    return list(dict.fromkeys(_grid(patterns, clients, sizes, idems, loops, records)))
