"""Confluent Schema Registry: an async client and Avro / JSON Schema / Protobuf serializers.

Values go out in Confluent's wire format (magic byte 0, 4-byte schema id,
payload) so Confluent's deserializers, Kafka Connect and ksqlDB read them.
Give a serializer as the producer's ``value_serializer`` (or
``key_serializer`` with ``is_key=True``); the producer resolves its schema id
once per topic, without blocking the event loop::

    async with SchemaRegistryClient("http://localhost:8081") as registry:
        serializer = AvroSerializer(registry, schema_str)
        async with Producer(bootstrap_servers=..., value_serializer=serializer) as p:
            await p.send("orders", {"id": 1, "amount": 9.5})

Imports of fastavro/jsonschema/protobuf happen when a serializer is made.

Configured from Confluent's property names (as the Spark sink is):
:func:`client_kwargs` turns ``{"url": ..., "basic.auth.user.info": ...}`` (each
name optionally behind :data:`PREFIX`, ``schema.registry.``) into keywords of
:class:`SchemaRegistryClient`, and :data:`STRATEGIES` maps Confluent's subject
name strategy names (``TopicNameStrategy``...) to the functions.
"""

from __future__ import annotations

from .avro import AvroSerializer
from .client import RegisteredSchema, Schema, SchemaReference, SchemaRegistryClient
from .config import PREFIX, client_kwargs
from .errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    SchemaNotFoundError,
    SchemaRegistryAuthError,
    SchemaRegistryError,
    SchemaRegistryTLSError,
    SchemaRegistryUnavailableError,
    SchemaValidationError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from .json_schema import JsonSchemaSerializer
from .protobuf import ProtobufSerializer
from .serializer import (
    STRATEGIES,
    SchemaSerializer,
    record_name_strategy,
    split_wire,
    topic_name_strategy,
    topic_record_name_strategy,
)

__all__ = [
    "PREFIX",
    "STRATEGIES",
    "AvroSerializer",
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "JsonSchemaSerializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "Schema",
    "SchemaNotFoundError",
    "SchemaReference",
    "SchemaRegistryAuthError",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SchemaRegistryTLSError",
    "SchemaRegistryUnavailableError",
    "SchemaSerializer",
    "SchemaValidationError",
    "SubjectNotFoundError",
    "VersionNotFoundError",
    "client_kwargs",
    "record_name_strategy",
    "split_wire",
    "topic_name_strategy",
    "topic_record_name_strategy",
]
