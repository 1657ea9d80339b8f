"""KafkaBroker's command line and server.properties, built without starting Java."""

from __future__ import annotations

from pathlib import Path

from tests.support.kafka_broker import KafkaBroker, Listener


def test_jvm_args_come_before_the_classpath(tmp_path: Path) -> None:
    allowed = "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=http://127.0.0.1:1/jwks"
    broker = KafkaBroker(workdir=tmp_path, libs=tmp_path, jvm_args=[allowed])
    command = broker._java_command("kafka.Kafka", "server.properties")
    assert command.index(allowed) < command.index("-cp")
    assert command[-2:] == ["kafka.Kafka", "server.properties"]
    assert allowed not in KafkaBroker(workdir=tmp_path, libs=tmp_path)._java_command("kafka.Kafka")


def test_listener_properties_are_prefixed_with_the_listener_name(tmp_path: Path) -> None:
    broker = KafkaBroker(
        workdir=tmp_path,
        libs=tmp_path,
        listeners=[
            Listener("REAUTH", "SASL_PLAINTEXT", properties={"connections.max.reauth.ms": "3000"})
        ],
    )
    props = broker.server_properties()
    assert props["listener.name.reauth.connections.max.reauth.ms"] == "3000"
    assert "REAUTH:SASL_PLAINTEXT" in props["listener.security.protocol.map"]
    assert f"REAUTH://127.0.0.1:{broker.listeners[0].port}" in props["advertised.listeners"]
