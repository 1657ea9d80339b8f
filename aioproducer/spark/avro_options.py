"""The sink's Schema Registry options: Avro key and value columns, checked on the driver.

``value.format`` / ``key.format`` choose how the column is written: ``bytes``
(the default: a string or binary column, as is) or ``avro`` (a struct column,
encoded with an Avro schema in Confluent's wire format). The registry is named
with Confluent's client properties (``schema.registry.url``,
``basic.auth.user.info``, ``bearer.auth.token``, ``schema.registry.ssl.*``...)
and the serializers' (``auto.register.schemas``, ``use.latest.version``,
``normalize.schemas``, ``value.subject.name.strategy``...). Spark lower-cases
option names; Confluent's are all lower case already.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..schema_registry import PREFIX as REGISTRY_PREFIX
from ..schema_registry import STRATEGIES, client_kwargs

__all__ = ["AvroColumnOptions", "AvroOptions", "is_avro_option", "parse_avro_options"]

FORMATS = ("bytes", "avro")

# Confluent's registry client properties that do not carry the prefix.
_AUTH = frozenset(
    {
        "basic.auth.user.info",
        "basic.auth.credentials.source",
        "bearer.auth.token",
        "bearer.auth.credentials.source",
        "bearer.auth.logical.cluster",
        "bearer.auth.identity.pool.id",
    }
)
_SECRETS = frozenset({"basic.auth.user.info", "bearer.auth.token", "ssl.key.password"})
_SERIALIZER = frozenset({"auto.register.schemas", "use.latest.version", "normalize.schemas"})
_PER_COLUMN = ("format", "subject.name.strategy", "avro.record.name", "avro.record.namespace")
# The Java serializers' class names of the strategies, accepted as well.
_JAVA_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
# Avro names (the specification's "Names"): letters, digits, underscores.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMESPACE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)?")
# Spark's to_avro default, so a derived schema reads as Spark's own would.
DEFAULT_RECORD_NAME = "topLevelRecord"


def is_avro_option(name: str) -> bool:
    """Whether ``name`` (lower case) is one of this module's options."""
    if name.startswith(REGISTRY_PREFIX) or name in _AUTH or name in _SERIALIZER:
        return True
    column, _, rest = name.partition(".")
    return column in ("key", "value") and rest in _PER_COLUMN


@dataclass(frozen=True)
class AvroColumnOptions:
    """How one column (key or value) is encoded; ``schema_str`` is filled in at planning."""

    is_key: bool
    subject_name_strategy: str = "TopicNameStrategy"
    record_name: str = DEFAULT_RECORD_NAME
    record_namespace: str = ""
    # Filled in at planning: the Avro schema derived from the column's struct
    # type, and that type (Spark's JSON form; tasks rebuild it).
    schema_str: str | None = None
    spark_type: str | None = None

    @property
    def full_name(self) -> str:
        """The record's full name (what RecordNameStrategy uses)."""
        return (
            f"{self.record_namespace}.{self.record_name}"
            if self.record_namespace
            else self.record_name
        )

    @property
    def which(self) -> str:
        return "key" if self.is_key else "value"


@dataclass(frozen=True)
class AvroOptions:
    """The registry and the Avro columns; picklable, shipped to every task."""

    registry: dict[str, str]
    value: AvroColumnOptions | None = None
    key: AvroColumnOptions | None = None
    auto_register_schemas: bool = True
    use_latest_version: bool = False
    normalize_schemas: bool = False

    @property
    def columns(self) -> tuple[AvroColumnOptions, ...]:
        """The Avro columns: value first, then key."""
        return tuple(c for c in (self.value, self.key) if c is not None)

    def __repr__(self) -> str:
        # basic.auth.user.info and bearer.auth.token are secrets: never in logs.
        shown = {
            k: "[hidden]" if k.removeprefix(REGISTRY_PREFIX) in _SECRETS else v
            for k, v in self.registry.items()
        }
        return (
            f"AvroOptions(registry={shown!r}, value={self.value!r}, key={self.key!r}, "
            f"auto_register_schemas={self.auto_register_schemas!r}, "
            f"use_latest_version={self.use_latest_version!r}, "
            f"normalize_schemas={self.normalize_schemas!r})"
        )

    def subject(self, column: AvroColumnOptions, topic: str) -> str:
        """The subject ``column``'s schema is under, for ``topic``."""
        return STRATEGIES[column.subject_name_strategy](topic, column.is_key, column.full_name)

    def serializer_options(self, column: AvroColumnOptions) -> dict[str, Any]:
        """Keyword arguments of AvroSerializer for ``column``."""
        return {
            "is_key": column.is_key,
            "subject_name_strategy": column.subject_name_strategy,
            "auto_register_schemas": self.auto_register_schemas,
            "use_latest_version": self.use_latest_version,
            "normalize_schemas": self.normalize_schemas,
        }


def _bool(name: str, value: str) -> bool:
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigurationError(f"option {name!r} must be true or false, got {value!r}")


def _strategy(name: str, value: str) -> str:
    short = value.strip().removeprefix(_JAVA_STRATEGY_PACKAGE)
    for known in STRATEGIES:  # Spark lower-cases names, not values; accept either case
        if known.lower() == short.lower():
            return known
    raise ConfigurationError(
        f"option {name!r}: unknown subject name strategy {value!r}; known: "
        + ", ".join(sorted(STRATEGIES))
    )


def _column(which: str, opts: Mapping[str, str]) -> AvroColumnOptions | None:
    fmt = opts.get(f"{which}.format", "bytes").strip().lower()
    if fmt not in FORMATS:
        raise ConfigurationError(
            f"option '{which}.format' must be one of {', '.join(FORMATS)}, got {fmt!r}"
        )
    given = [f"{which}.{o}" for o in _PER_COLUMN[1:] if f"{which}.{o}" in opts]
    if fmt != "avro":
        if given:
            raise ConfigurationError(
                f"option {given[0]!r} is only used with option('{which}.format', 'avro')"
            )
        return None
    name = opts.get(f"{which}.avro.record.name", DEFAULT_RECORD_NAME).strip()
    namespace = opts.get(f"{which}.avro.record.namespace", "").strip()
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"option '{which}.avro.record.name' must be an Avro name (letters, digits and "
            f"underscores, not starting with a digit), got {name!r}"
        )
    if not _NAMESPACE.fullmatch(namespace):
        raise ConfigurationError(
            f"option '{which}.avro.record.namespace' must be dot-separated Avro names, "
            f"got {namespace!r}"
        )
    strategy_option = f"{which}.subject.name.strategy"
    strategy = _strategy(strategy_option, opts.get(strategy_option, "TopicNameStrategy"))
    return AvroColumnOptions(which == "key", strategy, name, namespace)


def parse_avro_options(opts: Mapping[str, str]) -> AvroOptions | None:
    """Check this module's options (lower-case names); None when no column is Avro."""
    value = _column("value", opts)
    key = _column("key", opts)
    registry = {k: v for k, v in opts.items() if k.startswith(REGISTRY_PREFIX) or k in _AUTH}
    if value is None and key is None:
        stray = sorted(k for k in opts if not k.endswith(".format"))
        if stray:
            raise ConfigurationError(
                f"option {stray[0]!r} is only used when a column is written as Avro: "
                "set option('value.format', 'avro') or option('key.format', 'avro')"
            )
        return None
    if not registry.get(f"{REGISTRY_PREFIX}url", "").strip():
        which = "value" if value is not None else "key"
        raise ConfigurationError(
            f"option('{which}.format', 'avro') needs option('schema.registry.url', ...): "
            "the Schema Registry that holds the schemas"
        )
    # The client's own checks (known properties, user:password form, TLS files),
    # on the driver, so a mistake fails the query before any task starts.
    client_kwargs(registry)
    use_latest = _bool("use.latest.version", opts.get("use.latest.version", "false"))
    auto = opts.get("auto.register.schemas")
    if use_latest and auto is not None and _bool("auto.register.schemas", auto):
        raise ConfigurationError(
            "options 'use.latest.version' and 'auto.register.schemas' are both true: with "
            "use.latest.version the subject's latest schema is written and nothing is "
            "registered; set auto.register.schemas to false or leave it out"
        )
    return AvroOptions(
        registry=registry,
        value=value,
        key=key,
        auto_register_schemas=not use_latest
        and (auto is None or _bool("auto.register.schemas", auto)),
        use_latest_version=use_latest,
        normalize_schemas=_bool("normalize.schemas", opts.get("normalize.schemas", "false")),
    )
