"""The broker a benchmark runs against: Apache Kafka (default), Tansu, or an external one.

Apache Kafka is the reference: a single KRaft broker (combined broker and
controller, :class:`tests.support.kafka_broker.KafkaBroker`) from the jars
that ``tools/kafka/fetch.sh`` fetches, its log in a temporary directory on tmpfs
(``/dev/shm``, where there is one) that is removed afterwards. On a disk, a run
of a million 1 KiB records writes a gigabyte, and after a few runs the kernel's
dirty-page writeback throttles the broker's appends: the broker's CPU per record
went from about 1.7 to 4-5 µs in the middle of a run of runs, and whichever
client ran then looked slow. The benchmarks measure clients, not disks. ``tansu`` runs the embedded Tansu broker (in-memory
storage) instead, as earlier benchmark pages did.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["BROKERS", "add_broker_arguments", "broker_for"]

BROKERS = ("kafka", "tansu")

# The broker shares the host with the clients: a heap that holds a run's
# segments index and request buffers without growing into the clients' memory.
KAFKA_HEAP = "1g"
TMPFS = "/dev/shm"
# A deleted topic's files go at once, not a minute later, so that tmpfs (memory)
# holds one run's log at a time.
KAFKA_PROPERTIES = {"log.segment.delete.delay.ms": "0"}


# A run writes up to a gigabyte (a million 1 KiB records) and its topic goes
# once counted; a container's small /dev/shm (64 MiB in Docker) cannot hold that.
TMPFS_NEEDED = 4 * 1024**3


def log_place() -> tuple[str | None, str]:
    """A tmpfs directory for the broker's log (None: a temporary one on disk) and its description."""
    try:
        usable = os.access(TMPFS, os.W_OK) and shutil.disk_usage(TMPFS).free >= TMPFS_NEEDED
    except OSError:
        usable = False
    if usable:
        return tempfile.mkdtemp(prefix="aioproducer-bench-kafka-", dir=TMPFS), "log on tmpfs"
    return None, "log on local disk"


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="kafka",
        help="the local broker to start: Apache Kafka (default) or Tansu",
    )
    parser.add_argument("--bootstrap", help="an existing broker instead of starting one")


@contextmanager
def broker_for(
    kind: str, bootstrap: str | None, announce: Callable[[str], None] = print
) -> Iterator[tuple[str, str]]:
    """``(bootstrap address, description)`` of the broker for the block.

    Raises KafkaJarsUnavailable (naming ``tools/kafka/fetch.sh``) when Apache
    Kafka is asked for and its jars were not fetched.
    """
    if bootstrap:
        yield bootstrap, f"external broker at {bootstrap}"
        return
    if kind == "tansu":
        from aioproducer.embedded import bootstrap_or_local

        with bootstrap_or_local(None) as address:
            announce(f"started Tansu at {address}")
            yield address, "local Tansu (in-memory storage)"
        return
    if kind != "kafka":
        raise ValueError(f"unknown broker {kind!r}; choose one of {', '.join(BROKERS)}")
    from tests.support.kafka_broker import KAFKA_VERSION, KafkaBroker

    workdir, place = log_place()
    broker = None
    try:
        broker = KafkaBroker(heap=KAFKA_HEAP, workdir=workdir, properties=KAFKA_PROPERTIES)
        broker.start()
        announce(f"started Apache Kafka {KAFKA_VERSION} at {broker.bootstrap_servers} ({place})")
        yield (
            broker.bootstrap_servers,
            f"local Apache Kafka {KAFKA_VERSION} (one KRaft broker, {place})",
        )
    finally:
        if broker is not None:
            broker.stop()
            broker.cleanup()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
