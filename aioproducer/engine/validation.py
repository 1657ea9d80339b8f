"""Checks on what users pass to ``send``/``enqueue``: bad input fails here, typed and named.

Nothing reaches the accumulator before it passes these checks, so a rejected
record never occupies buffer memory or a place in a batch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from .. import errors
from .batch import RECORD_HANDLE_OVERHEAD

__all__ = [
    "MAX_TIMESTAMP_MS",
    "MAX_TOPIC_LENGTH",
    "check_headers",
    "check_record_size",
    "check_topic",
    "to_bytes",
]

# A record batch's timestamps are int64 (milliseconds since the epoch).
MAX_TIMESTAMP_MS = 2**63 - 1

# Kafka's Topic.validate: at most 249 characters of [a-zA-Z0-9._-], not "." or "..".
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+\Z")
_valid_topics: set[str] = set()


def check_topic(topic: Any) -> None:
    """Raise InvalidTopicError unless ``topic`` is a legal Kafka topic name."""
    if topic in _valid_topics:
        return
    if not isinstance(topic, str):
        raise errors.InvalidTopicError(f"topic must be a str, got {type(topic).__name__}")
    if not topic:
        raise errors.InvalidTopicError("topic name is empty")
    if topic in (".", ".."):
        raise errors.InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise errors.InvalidTopicError(
            f"topic name is {len(topic)} characters long; the maximum is {MAX_TOPIC_LENGTH}"
        )
    if not _LEGAL_TOPIC.match(topic):
        bad = sorted({c for c in topic if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise errors.InvalidTopicError(
            f"topic name {topic!r} contains illegal characters {bad}; "
            "allowed are ASCII letters, digits, '.', '_' and '-'"
        )
    if len(_valid_topics) < 10000:
        _valid_topics.add(topic)


def to_bytes(
    obj: Any, what: str, serializer: Callable[[Any], Any] | None, topic: str
) -> bytes | None:
    """Serialize a key or value; ``None`` stays None (a null key, a tombstone)."""
    if serializer is not None:
        try:
            obj = serializer(obj)
        except errors.SerializationError:
            raise  # already typed and explained (e.g. a value that does not fit its schema)
        except Exception as exc:
            raise errors.SerializationError(
                f"the {what} serializer failed for topic {topic!r}: {exc!r}"
            ) from exc
        if obj is not None and not isinstance(obj, (bytes, bytearray, memoryview)):
            raise TypeError(f"the {what} serializer returned {type(obj).__name__}, not bytes")
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, bytes):
        return bytes(obj)
    raise TypeError(
        f"{what} must be bytes-like or None when no {what}_serializer is set, "
        f"got {type(obj).__name__}"
    )


def check_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Headers must be a sequence of (str, bytes-like or None) pairs; return a checked list."""
    if isinstance(headers, (str, bytes, dict)) or not isinstance(headers, Sequence):
        raise TypeError(
            f"headers must be a sequence of (str, bytes) pairs, got {type(headers).__name__}"
        )
    out: list[tuple[str, bytes | None]] = []
    for i, item in enumerate(headers):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"headers[{i}] must be a (str, bytes) pair, got {item!r}")
        name, value = item
        if not isinstance(name, str):
            raise TypeError(f"headers[{i}] name must be str, got {type(name).__name__}")
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"headers[{i}] ({name!r}) value must be bytes or None, got {type(value).__name__}"
            )
        out.append((name, None if value is None else bytes(value)))
    return out


def check_record_size(size: int, max_request_size: int, buffer_memory: int) -> None:
    """Raise RecordTooLargeError if a record of ``size`` bytes (serialized) can never be sent.

    It must fit in one request, and with its bookkeeping in the buffer memory.
    """
    if size > max_request_size:
        raise errors.RecordTooLargeError(
            f"the record is {size} bytes when serialized, larger than "
            f"max_request_size ({max_request_size})"
        )
    if size + RECORD_HANDLE_OVERHEAD > buffer_memory:
        raise errors.RecordTooLargeError(
            f"the record is {size} bytes when serialized (plus {RECORD_HANDLE_OVERHEAD} "
            f"of bookkeeping), larger than buffer_memory ({buffer_memory})"
        )
