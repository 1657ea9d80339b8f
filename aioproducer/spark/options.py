"""The sink's options: checked on the driver, shipped to every task.

The option names mirror Spark's own Kafka sink: ``kafka.bootstrap.servers``
(required), ``topic`` and any ``kafka.<Java producer property>``, plus the
opt-in ``transactional`` mode and Avro key/value columns through a Schema
Registry (:mod:`.avro_options`). This module imports neither the data source
nor the writers: both depend on it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import ProducerConfig, check_topic
from ..errors import ConfigurationError
from .avro_options import AvroOptions, is_avro_option, parse_avro_options

__all__ = [
    "KAFKA_PREFIX",
    "SINK_BATCH_SIZE",
    "SinkOptions",
    "parse_options",
    "refuse_speculation",
]

KAFKA_PREFIX = "kafka."

# Producer properties the sink owns: records are already bytes, partitions come
# from the ``partition`` column and transactional ids from the prefix option.
_RESERVED = {
    "key.serializer": "keys are written as the bytes of the 'key' column",
    "value.serializer": "values are written as the bytes of the 'value' column",
    "partitioner.class": "use the 'partition' column to choose partitions",
    "transactional.id": (
        "set option('transactional', 'true') and option('transactional.id.prefix', ...) "
        "instead; each task derives its own id from the prefix"
    ),
}

# batch.size when the user sets none: the sink hands the producer rows by the
# thousand, and Java's default (16 KiB) makes a batch, with its per-batch work in
# the producer and the broker, of every ~150 rows of 100 B; 256 KiB batches cut
# the producer's CPU per record by about half. Never above max.request.size.
SINK_BATCH_SIZE = 262_144

# Kafka's default transaction.max.timeout.ms (15 minutes).
_JOB_TRANSACTION_TIMEOUT_MS = 900_000

# Options Spark itself passes to every data source (or that belong to the
# streaming engine); they are not ours to reject.
_SPARK_OPTIONS = {"path", "checkpointlocation", "queryname"}


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options after checking; picklable, shipped to every task."""

    producer_properties: dict[str, str]
    topic: str | None = None
    transactional: bool = False
    transactional_id_prefix: str | None = None
    # Extra Spark-side options we accepted but do not interpret (for messages).
    ignored: tuple[str, ...] = field(default=())
    # Avro key/value columns through a Schema Registry (None: bytes as given).
    avro: AvroOptions | None = None

    def __repr__(self) -> str:
        # Security properties (kafka.sasl.jaas.config, kafka.ssl.key.password...)
        # pass through to the producer; their values stay out of logs.
        shown = ProducerConfig.redact_properties(self.producer_properties)
        return (
            f"SinkOptions(producer_properties={shown!r}, "
            f"topic={self.topic!r}, transactional={self.transactional!r}, "
            f"transactional_id_prefix={self.transactional_id_prefix!r}, ignored={self.ignored!r}, "
            f"avro={self.avro!r})"
        )

    def task_properties(self, partition_id: int) -> dict[str, str]:
        """Producer properties for one task: a client id and, if transactional, its id."""
        props = _with_sink_defaults(self.producer_properties)
        props.setdefault("client.id", f"aioproducer-spark-{partition_id}")
        if self.transactional:
            props["transactional.id"] = self.transactional_id(partition_id)
            # A task's transaction stays open until the driver commits the job,
            # so its timeout must cover the job, not the task: the brokers'
            # default transaction.max.timeout.ms, unless the user chose one.
            props.setdefault("transaction.timeout.ms", str(_JOB_TRANSACTION_TIMEOUT_MS))
        return props

    def shared_properties(self) -> dict[str, str]:
        """Producer properties for the at-least-once tasks of one Spark worker
        process, which share a producer (no per-partition client id)."""
        props = _with_sink_defaults(self.producer_properties)
        props.setdefault("client.id", f"aioproducer-spark-worker-{os.getpid()}")
        return props

    def driver_properties(self) -> dict[str, str]:
        """Producer properties for the driver, which completes the tasks' transactions."""
        props = dict(self.producer_properties)
        props.setdefault("client.id", "aioproducer-spark-driver")
        return props

    def transactional_id(self, partition_id: int) -> str:
        # Stable across task attempts: the retry's init_transactions() fences the
        # failed attempt and aborts whatever it left open.
        return f"{self.transactional_id_prefix}-{partition_id}"


def _with_sink_defaults(properties: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``properties`` with the sink's batch.size unless the user chose one."""
    props = dict(properties)
    if "batch.size" not in props:
        try:
            limit = int(props.get("max.request.size", SINK_BATCH_SIZE))
        except ValueError:  # refused when the configuration is built
            limit = SINK_BATCH_SIZE
        props["batch.size"] = str(min(SINK_BATCH_SIZE, max(1, limit)))
    return props


def refuse_speculation(options: SinkOptions, speculation: str | None) -> None:
    """Raise ConfigurationError if a transactional write runs with ``spark.speculation`` on.

    ``speculation`` is the setting's value as the task sees it (None: unset).
    A speculative copy of a task would take the task's transactional id: its
    init_transactions() aborts the transaction the other attempt prepared, and
    the driver may be about to commit that one. Per-attempt ids would not do
    either: a Python data source hears nothing of the attempt Spark turns down,
    so nobody could end the transaction that attempt leaves open, and
    ``read_committed`` consumers would wait for it until it times out.
    """
    if not options.transactional or (speculation or "").strip().lower() != "true":
        return
    raise ConfigurationError(
        "option('transactional', 'true') cannot run with spark.speculation=true: a "
        "speculative copy of a task would share its transactional id and abort the "
        "transaction the other attempt prepared for the driver to commit. Start the "
        "application with spark.speculation=false (it cannot change in a running session), "
        "or write at-least-once, without option('transactional')"
    )


def _parse_bool(name: str, value: str) -> bool:
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigurationError(f"option {name!r} must be true or false, got {value!r}")


def parse_options(options: Mapping[str, Any]) -> SinkOptions:
    """Check the data source options; raise ConfigurationError naming the bad one.

    Spark hands options over case-insensitively with lower-cased names, which
    matches Java producer properties (all lower case) exactly.
    """
    props: dict[str, str] = {}
    topic: str | None = None
    transactional = False
    prefix: str | None = None
    ignored: list[str] = []
    avro: dict[str, str] = {}
    for raw_name, raw_value in options.items():
        name = str(raw_name).strip().lower()
        value = "" if raw_value is None else str(raw_value)
        if name.startswith(KAFKA_PREFIX):
            prop = name[len(KAFKA_PREFIX) :]
            if prop in _RESERVED:
                raise ConfigurationError(
                    f"option 'kafka.{prop}' is not supported: {_RESERVED[prop]}"
                )
            props[prop] = value
        elif name == "topic":
            topic = value.strip()
            check_topic(topic)
        elif name == "transactional":
            transactional = _parse_bool(name, value)
        elif name == "transactional.id.prefix":
            prefix = value.strip() or None
        elif is_avro_option(name):
            avro[name] = value
        elif name in _SPARK_OPTIONS:
            ignored.append(name)
        else:
            raise ConfigurationError(
                f"unknown option {raw_name!r} for the aioproducer sink; producer properties "
                f"take the 'kafka.' prefix (e.g. 'kafka.linger.ms'), other options are "
                f"'topic', 'transactional', 'transactional.id.prefix' and, for Avro through a "
                f"Schema Registry, 'value.format', 'key.format', 'schema.registry.url' and "
                f"Confluent's serializer properties"
            )
    if not props.get("bootstrap.servers", "").strip():
        raise ConfigurationError(
            "option 'kafka.bootstrap.servers' is required (e.g. 'host1:9092,host2:9092')"
        )
    if transactional and prefix is None:
        raise ConfigurationError(
            "option('transactional', 'true') needs option('transactional.id.prefix', ...): "
            "a name that stays the same when the job is retried or restarted, so a new task "
            "attempt fences the one it replaces"
        )
    if prefix is not None and not transactional:
        raise ConfigurationError(
            "option 'transactional.id.prefix' is only used with option('transactional', 'true')"
        )
    opts = SinkOptions(
        producer_properties=props,
        topic=topic,
        transactional=transactional,
        transactional_id_prefix=prefix,
        ignored=tuple(ignored),
        avro=parse_avro_options(avro),
    )
    # Build one configuration now: an unknown or inconsistent property fails the
    # query at analysis time instead of failing every task.
    ProducerConfig.from_properties(opts.task_properties(0))
    return opts
