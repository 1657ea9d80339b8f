"""Configuration: defaults, combination checks and the Java property names."""

from __future__ import annotations

import pytest

from aioproducer import Producer, ProducerConfig
from aioproducer.config import config_from_properties
from aioproducer.errors import ConfigurationError
from aioproducer.net.client import parse_bootstrap
from aioproducer.protocol.compression import Codec


def test_defaults_match_the_java_producer() -> None:
    cfg = ProducerConfig().validate()
    assert cfg.acks_value == -1 and cfg.idempotent is True
    assert (cfg.batch_size, cfg.linger_ms, cfg.buffer_memory) == (16384, 5, 32 << 20)
    assert (cfg.delivery_timeout_ms, cfg.request_timeout_ms, cfg.max_block_ms) == (
        120000,
        30000,
        60000,
    )


def test_from_config_maps_java_names_and_string_values() -> None:
    p = Producer.from_config(
        {
            "bootstrap.servers": "a:1,b:2",
            "linger.ms": "10",
            "batch.size": 1000,
            "acks": "1",
            "compression.type": "zstd",
            "enable.idempotence": "false",
            "compression.zstd.level": "3",
            "security.protocol": "PLAINTEXT",
        }
    )
    cfg = p.config
    assert cfg.linger_ms == 10 and cfg.batch_size == 1000 and cfg.acks_value == 1
    assert cfg.codec is Codec.ZSTD and cfg.compression_level == 3 and cfg.idempotent is False


def test_unknown_property_is_named_with_a_suggestion() -> None:
    with pytest.raises(ConfigurationError, match=r"'linger\.msec'.*did you mean 'linger\.ms'"):
        Producer.from_config({"bootstrap.servers": "a:1", "linger.msec": 5})


def test_bad_values_are_named() -> None:
    with pytest.raises(ConfigurationError, match="linger.ms must be an integer"):
        config_from_properties({"linger.ms": "soon"})
    with pytest.raises(ConfigurationError, match="acks"):
        Producer("a:1", acks=2)
    with pytest.raises(ConfigurationError, match="compression"):
        Producer("a:1", compression="brotli")
    with pytest.raises(ConfigurationError, match="batch_size"):
        Producer("a:1", batch_size=0)
    with pytest.raises(ConfigurationError, match="delivery_timeout_ms"):
        Producer("a:1", delivery_timeout_ms=1000, request_timeout_ms=30000)
    with pytest.raises(ConfigurationError, match="no_such_option"):
        Producer("a:1", no_such_option=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="security_protocol"):
        Producer.from_config({"security.protocol": "SSL_KERBEROS"})


@pytest.mark.parametrize(
    ("name", "largest"),
    [
        ("batch_size", 2**31 - 1),
        ("max_request_size", 2**31 - 1),
        ("buffer_memory", 2**63 - 1),
        ("max_block_ms", 2**63 - 1),
        ("transaction_timeout_ms", 2**31 - 1),
    ],
)
def test_sizes_and_times_are_bounded_by_javas_types(name: str, largest: int) -> None:
    """An INT setting is an int32 and a LONG one an int64, as in Java: a value
    the protocol's fields (or the compiled path) cannot hold is refused at once."""
    with pytest.raises(
        ConfigurationError, match=rf"{name} must be an integer from \d+ to {largest}\b"
    ):
        Producer("a:1", **{name: largest + 1})
    with pytest.raises(ConfigurationError, match=name):
        Producer("a:1", **{name: 2**64})
    Producer("a:1", **{name: largest, "delivery_timeout_ms": 2**31 - 1})  # the largest is fine


def test_idempotence_default_yields_to_conflicts_but_explicit_true_does_not() -> None:
    assert Producer("a:1", acks=1).config.idempotent is False
    assert Producer("a:1", max_in_flight_requests_per_connection=6).config.idempotent is False
    with pytest.raises(ConfigurationError, match='acks="all"'):
        Producer("a:1", acks=0, enable_idempotence=True)
    with pytest.raises(ConfigurationError, match="at most 5"):
        Producer("a:1", enable_idempotence=True, max_in_flight_requests_per_connection=6)
    with pytest.raises(ConfigurationError, match="transactional_id"):
        Producer("a:1", transactional_id="t", enable_idempotence=False)


def test_bootstrap_forms() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(ConfigurationError, match="host:port"):
        parse_bootstrap("nohost")
    with pytest.raises(ConfigurationError):
        parse_bootstrap("")


def test_metadata_and_partitioner_settings_match_java() -> None:
    cfg = ProducerConfig().validate()
    assert cfg.metadata_max_idle_ms == 300000
    assert (cfg.metadata_recovery_strategy, cfg.metadata_recovery_rebootstrap_trigger_ms) == (
        "rebootstrap",
        300000,
    )
    assert cfg.partitioner_adaptive_partitioning is True
    assert (cfg.partitioner_availability_timeout_ms, cfg.partitioner_ignore_keys) == (0, False)
    cfg = config_from_properties(
        {
            "metadata.max.idle.ms": "60000",
            "metadata.recovery.strategy": "none",
            "metadata.recovery.rebootstrap.trigger.ms": "1000",
            "partitioner.adaptive.partitioning.enable": "false",
            "partitioner.availability.timeout.ms": "250",
            "partitioner.ignore.keys": "true",
        }
    )
    assert cfg.metadata_max_idle_ms == 60000 and cfg.metadata_recovery_strategy == "none"
    assert cfg.metadata_recovery_rebootstrap_trigger_ms == 1000
    assert cfg.partitioner_adaptive_partitioning is False
    assert cfg.partitioner_availability_timeout_ms == 250 and cfg.partitioner_ignore_keys is True
    with pytest.raises(ConfigurationError, match="metadata_recovery_strategy"):
        Producer("a:1", metadata_recovery_strategy="sometimes")
    with pytest.raises(ConfigurationError, match="partitioner_ignore_keys"):
        Producer("a:1", partitioner_ignore_keys="yes")
    with pytest.raises(ConfigurationError, match="metadata_max_idle_ms"):
        Producer("a:1", metadata_max_idle_ms=0)


def test_protocol_prefixes_and_ipv6_parse() -> None:
    assert parse_bootstrap("PLAINTEXT://a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["SASL_SSL://a:9093", "[::1]:9092", "ssl://[fe80::1%eth0]:1"]) == [
        ("a", 9093),
        ("::1", 9092),
        ("fe80::1%eth0", 1),
    ]
    assert parse_bootstrap("SASL_PLAINTEXT://[::1]:9092", "SASL_PLAINTEXT") == [("::1", 9092)]
    from aioproducer.net.bootstrap import format_address

    assert format_address("::1", 9092) == "[::1]:9092" and format_address("a", 1) == "a:1"


@pytest.mark.parametrize(
    "servers",
    ["HTTP://a:1", "a:0", "a:65536", "a:", ":1", "[::1]", "[::1:9092", "a:1/", "PLAINTEXT://"],
)
def test_malformed_addresses_are_refused_at_construction(servers: str) -> None:
    with pytest.raises(
        ConfigurationError, match="bootstrap server .* (is not of the form|unknown protocol)"
    ):
        Producer(servers)


def test_a_prefix_that_contradicts_security_protocol_is_refused() -> None:
    # The prefix chooses nothing (as in Java): a mismatch is a forgotten security_protocol.
    with pytest.raises(
        ConfigurationError,
        match=r"'SSL://a:1' says SSL but security_protocol is PLAINTEXT: "
        r"set security_protocol='SSL'",
    ):
        Producer("SSL://a:1")
    with pytest.raises(ConfigurationError, match="PLAINTEXT but security_protocol is SASL_SSL"):
        Producer.from_config(
            {
                "bootstrap.servers": "b:2,PLAINTEXT://a:1",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "p",
            }
        )
    assert Producer("SSL://a:1", security_protocol="ssl").config.security.protocol == "SSL"


def test_a_list_is_copied_and_checked() -> None:
    servers = ["a:1", "PLAINTEXT://b:2"]
    producer = Producer(servers)
    servers.append("c:3")
    assert producer.config.bootstrap_servers == ["a:1", "PLAINTEXT://b:2"]
    with pytest.raises(ConfigurationError, match="not a string"):
        Producer(["a:1", 9092])  # type: ignore[list-item]


def test_client_dns_lookup_is_accepted_for_what_the_producer_does() -> None:
    # Property files (Confluent Cloud's among them) carry it; every address a
    # name resolves to is tried in turn, which is use_all_dns_ips (KIP-602).
    props = {"bootstrap.servers": "a:1", "client.dns.lookup": "use_all_dns_ips"}
    assert Producer.from_config(props).config.bootstrap_servers == "a:1"
    with pytest.raises(ConfigurationError, match="client.dns.lookup.*not supported"):
        Producer.from_config({"client.dns.lookup": "resolve_canonical_bootstrap_servers_only"})
