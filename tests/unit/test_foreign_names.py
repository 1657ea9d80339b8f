"""Names that are right in aiokafka or librdkafka get what to use here, not a bare refusal."""

from __future__ import annotations

import pytest

from aioproducer import Producer, errors
from aioproducer.config.foreign_names import LIBRDKAFKA_PROPERTIES, PEER_METHODS, PEER_SETTINGS


@pytest.mark.parametrize("name", sorted(PEER_METHODS))
def test_a_peer_producers_method_says_what_to_call(name: str) -> None:
    producer = Producer("127.0.0.1:1")
    with pytest.raises(AttributeError, match=rf"has no attribute '{name}': ") as raised:
        getattr(producer, name)
    assert PEER_METHODS[name] in str(raised.value)
    assert raised.value.name == name


def test_other_missing_attributes_are_plain_attribute_errors() -> None:
    producer = Producer("127.0.0.1:1")
    assert getattr(producer, "no_such_thing", "default") == "default"
    with pytest.raises(
        AttributeError, match=r"^'Producer' object has no attribute 'no_such_thing'$"
    ):
        producer.no_such_thing  # type: ignore[attr-defined]  # noqa: B018


def test_no_listed_name_exists_here() -> None:
    """A hint for a name that exists would never be shown, or would shadow it."""
    from aioproducer.config import JAVA_PROPERTY_NAMES, ProducerConfig

    settings = set(ProducerConfig.__dataclass_fields__)
    assert not set(PEER_SETTINGS) & settings
    assert not set(LIBRDKAFKA_PROPERTIES) & set(JAVA_PROPERTY_NAMES)
    assert not [name for name in PEER_METHODS if hasattr(Producer, name)]


@pytest.mark.parametrize("name", sorted(PEER_SETTINGS))
def test_an_aiokafka_setting_says_what_to_use(name: str) -> None:
    with pytest.raises(errors.ConfigurationError) as raised:
        Producer("127.0.0.1:1", **{name: 1})
    assert f"unknown producer setting {name!r}: {PEER_SETTINGS[name]}" in str(raised.value)


@pytest.mark.parametrize("name", sorted(LIBRDKAFKA_PROPERTIES))
def test_a_librdkafka_property_says_what_to_use(name: str) -> None:
    with pytest.raises(errors.ConfigurationError) as raised:
        Producer.from_config({"bootstrap.servers": "127.0.0.1:1", name: "1"})
    assert f"unknown producer property {name!r}: {LIBRDKAFKA_PROPERTIES[name]}" in str(raised.value)
