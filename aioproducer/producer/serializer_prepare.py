"""Serializers that must be prepared per topic before use (schema-aware ones).

A ``key_serializer``/``value_serializer`` with an async ``prepare(topic)`` and
a ``for_topic(topic)`` (such as
:class:`~aioproducer.schema_registry.AvroSerializer`) resolves something over
the network once per topic, a schema id, then serializes synchronously. The
producer awaits ``prepare`` before the first record of a topic is serialized,
so no HTTP call blocks the event loop and a failure (registry unreachable,
schema refused) raises from ``send``/``enqueue`` before anything is buffered.
Producers whose serializers are plain callables hold None instead of a
:class:`SerializerPreparation` and pay one attribute test per record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeGuard

from ..engine.validation import to_bytes

__all__ = ["SerializerBinding", "SerializerPreparation"]

Serializer = Callable[[Any], Any]


class _PreparedPerTopic(Protocol):
    """What :func:`_needs_prepare` looks for (a schema-aware serializer)."""

    def prepare(self, topic: str) -> Awaitable[object]: ...

    def for_topic(self, topic: str) -> Serializer: ...


def _needs_prepare(serializer: object) -> TypeGuard[_PreparedPerTopic]:
    return callable(getattr(serializer, "prepare", None)) and callable(
        getattr(serializer, "for_topic", None)
    )


class SerializerPreparation:
    """The producer's key and value serializers, bound to each topic once prepared."""

    __slots__ = ("_bound", "_key", "_value")

    def __init__(self, key: Serializer | None, value: Serializer | None) -> None:
        self._key = key
        self._value = value
        # topic -> (key serializer, value serializer) for that topic
        self._bound: dict[str, tuple[Serializer | None, Serializer | None]] = {}

    @classmethod
    def of(cls, key: Serializer | None, value: Serializer | None) -> SerializerPreparation | None:
        """A preparation when either serializer needs one, else None."""
        if _needs_prepare(key) or _needs_prepare(value):
            return cls(key, value)
        return None

    def prepared(self, topic: str) -> bool:
        return topic in self._bound

    async def prepare(self, topic: str) -> None:
        """Prepare both serializers for ``topic`` (each caches; cheap when done)."""
        if topic in self._bound:
            return
        key, value = self._key, self._value
        if _needs_prepare(key):
            await key.prepare(topic)
            key = key.for_topic(topic)
        if _needs_prepare(value):
            await value.prepare(topic)
            value = value.for_topic(topic)
        if len(self._bound) < 10000:  # bounded, as the producer's other per-topic sets
            self._bound[topic] = (key, value)

    def bound(self, topic: str) -> tuple[Serializer | None, Serializer | None]:
        """``(key, value)`` serializers for ``topic``; :meth:`prepare` must have run."""
        found = self._bound.get(topic)
        if found is not None:
            return found
        key, value = self._key, self._value
        return (
            key.for_topic(topic) if _needs_prepare(key) else key,
            value.for_topic(topic) if _needs_prepare(value) else value,
        )


class SerializerBinding:
    """The producer's key and value serializers as one part: which apply to a topic, and applying them.

    ``active``: a serializer is configured, so every record goes through
    :meth:`serialize` (bytes too); ``prep``: the schema-aware preparation, or
    None for plain callables.
    """

    __slots__ = ("active", "key", "prep", "value")

    def __init__(self, key: Serializer | None, value: Serializer | None) -> None:
        self.key = key
        self.value = value
        self.active = key is not None or value is not None
        # Schema-aware serializers resolve their schema per topic first; None otherwise.
        self.prep = SerializerPreparation.of(key, value)

    def for_topic(self, topic: str) -> tuple[Serializer | None, Serializer | None]:
        """``(key, value)`` serializers for ``topic`` (prepared first, if schema-aware)."""
        if self.prep is not None:
            return self.prep.bound(topic)
        return self.key, self.value

    def serialize(self, topic: str, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        """Key and value as bytes: through the serializers, else bytes-like to bytes."""
        key_ser, value_ser = self.for_topic(topic)
        value = to_bytes(value, "value", value_ser, topic)
        if key is not None or key_ser is not None:
            key = to_bytes(key, "key", key_ser, topic)
        return key, value
