"""Capture librdkafka's SASL exchanges with Tansu (``tansu broker --authentication``).

Tansu 0.6 offers SCRAM and OAUTHBEARER but keeps no users, so every SCRAM login
ends in a server-final ``e=unknown-user``, and PLAIN is refused at the
handshake. Those refusals are still real SaslHandshake and SaslAuthenticate
frames in both directions, which is what the golden tests need.

    .venv/bin/python -m tests.golden.capture_sasl
"""

from __future__ import annotations

import json
import sys
import time

import confluent_kafka

from tests.golden.capture_golden import HERE, librdkafka_client_name, settle, tansu_behind_proxy
from tests.tools.capture_proxy import save_frames

# (file stem, sasl.mechanism): one short-lived producer each.
RUNS = (
    ("librdkafka_sasl_scram_sha_256", "SCRAM-SHA-256"),
    ("librdkafka_sasl_scram_sha_512", "SCRAM-SHA-512"),
    ("librdkafka_sasl_plain", "PLAIN"),
)


def _attempt(bootstrap: str, mechanism: str) -> tuple[dict[str, object], list[str]]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "client.id": "golden-librdkafka",
        "broker.address.family": "v4",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    seen: list[str] = []
    config["error_cb"] = lambda err: seen.append(str(err))
    producer = confluent_kafka.Producer(config)
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.close()
    config.pop("error_cb")
    config["sasl.password"] = "<redacted>"
    return config, seen


def main() -> None:
    with tansu_behind_proxy("--authentication") as (proxy, bootstrap, _port, version):
        for stem, mechanism in RUNS:
            config, seen = _attempt(bootstrap, mechanism)
            settle(proxy)
            save_frames(
                HERE / f"{stem}.frames",
                proxy.proxy.take(),
                [
                    f"client: {librdkafka_client_name()}",
                    f"config: {json.dumps(config)}",
                    f"broker: {version} --authentication (memory storage), via capture proxy",
                    f"client errors: {json.dumps(seen[:2])}",
                ],
            )
            print(f"captured {stem}: {seen[:1]}", file=sys.stderr)


if __name__ == "__main__":
    main()
