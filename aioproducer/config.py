"""Producer configuration: defaults, validation, and the Java property names.

:class:`ProducerConfig` holds every setting with the Java producer's defaults
and checks them together (``validate``), as ``ProducerConfig`` does in Java:
an inconsistent combination is a :class:`~aioproducer.errors.ConfigurationError`
at construction, never a surprise later. :func:`config_from_properties` maps
Java property names (``linger.ms``) onto ours (``linger_ms``), accepting the
string values that property files and Spark options carry, and the
security properties through :mod:`aioproducer.security_properties`
(``sasl.jaas.config``, librdkafka's ``ssl.ca.location``...).

Secrets (``sasl_plain_password``, ``ssl_password``,
``sasl_oauthbearer_client_secret``) are left out of ``repr``.
"""

from __future__ import annotations

import dataclasses
import difflib
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError
from .partitioner import PartitionerFn
from .protocol.compression import Codec, codec_from_name
from .sasl.oauthbearer import TokenProvider
from .security import Security, build_security
from .security_properties import SECURITY_PROPERTY_NAMES, translate_security_property

__all__ = ["JAVA_PROPERTY_NAMES", "ProducerConfig", "config_from_properties"]

Serializer = Callable[[Any], "bytes | None"]
_INT32_MAX = 2**31 - 1


@dataclass
class ProducerConfig:
    """Every producer setting, with the Java producer's defaults; ``validate()`` checks them."""

    bootstrap_servers: str | list[str] = "localhost:9092"
    client_id: str | None = None
    acks: int | str = "all"
    compression: str = "none"
    compression_level: int | None = None
    batch_size: int = 16384
    linger_ms: int = 5
    buffer_memory: int = 32 << 20
    max_block_ms: int = 60000
    max_request_size: int = 1 << 20
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    retries: int = _INT32_MAX
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    max_in_flight_requests_per_connection: int = 5
    # None means "True unless acks/retries/max in flight conflict", as in Java 3.x.
    enable_idempotence: bool | None = None
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    partitioner: PartitionerFn | None = None
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    metadata_max_age_ms: int = 300000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    connections_max_idle_ms: int = 540000
    allow_auto_create_topics: bool = True
    # Metrics (producer.metrics()): Java's metrics.sample.window.ms and
    # metrics.num.samples; metrics_enabled=False records no statistics.
    metrics_enabled: bool = True
    metrics_sample_window_ms: int = 30000
    metrics_num_samples: int = 2
    # ProducerInterceptor-like hooks (on_send, on_acknowledgement), in order.
    interceptors: Sequence[Any] = ()
    metadata_max_idle_ms: int = 300000
    # KIP-899: "rebootstrap" (Java 3.9+/4.0 default) or "none".
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300000
    # KIP-794, the uniform sticky partitioner.
    partitioner_adaptive_partitioning: bool = True
    partitioner_availability_timeout_ms: int = 0
    partitioner_ignore_keys: bool = False
    # Security: TLS and SASL (see security.py).
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = dataclasses.field(default=None, repr=False)
    ssl_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = dataclasses.field(default=None, repr=False)
    sasl_oauth_token_provider: TokenProvider | None = None
    sasl_oauthbearer_token_endpoint_url: str | None = None
    sasl_oauthbearer_client_id: str | None = None
    sasl_oauthbearer_client_secret: str | None = dataclasses.field(default=None, repr=False)
    sasl_oauthbearer_scope: str | None = None

    # Filled by validate():
    acks_value: int = dataclasses.field(default=-1, init=False, repr=False)
    codec: Codec = dataclasses.field(default=Codec.NONE, init=False, repr=False)
    idempotent: bool = dataclasses.field(default=False, init=False, repr=False)
    security: Security = dataclasses.field(default_factory=Security, init=False, repr=False)

    def validate(self) -> ProducerConfig:
        """Check every setting and the combinations; fill the derived fields."""
        self.acks_value = _parse_acks(self.acks)
        try:
            self.codec = codec_from_name(self.compression)
        except ValueError as exc:
            raise ConfigurationError(f"compression: {exc}") from None
        for name, low in (
            ("batch_size", 1),
            ("linger_ms", 0),
            ("buffer_memory", 1),
            ("max_block_ms", 0),
            ("max_request_size", 1),
            ("request_timeout_ms", 1),
            ("delivery_timeout_ms", 1),
            ("retries", 0),
            ("retry_backoff_ms", 0),
            ("retry_backoff_max_ms", 0),
            ("max_in_flight_requests_per_connection", 1),
            ("transaction_timeout_ms", 1),
            ("metadata_max_age_ms", 0),
            ("reconnect_backoff_ms", 0),
            ("reconnect_backoff_max_ms", 0),
            ("connections_max_idle_ms", 1),
            ("metrics_sample_window_ms", 1),
            ("metrics_num_samples", 1),
            ("metadata_max_idle_ms", 1),
            ("metadata_recovery_rebootstrap_trigger_ms", 0),
            ("partitioner_availability_timeout_ms", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigurationError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            # Java: delivery.timeout.ms should be >= linger.ms + request.timeout.ms
            raise ConfigurationError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be at least "
                f"linger_ms + request_timeout_ms ({self.linger_ms + self.request_timeout_ms})"
            )
        for name in ("allow_auto_create_topics", "partitioner_adaptive_partitioning",
                     "partitioner_ignore_keys", "metrics_enabled"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ConfigurationError(
                'metadata_recovery_strategy must be "rebootstrap" or "none", '
                f"got {self.metadata_recovery_strategy!r}"
            )
        for name in ("partitioner", "key_serializer", "value_serializer"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"{name} must be callable, got {value!r}")
        if isinstance(self.interceptors, (str, bytes)) or not isinstance(self.interceptors, Iterable):
            raise ConfigurationError(
                f"interceptors must be a list of objects, got {self.interceptors!r}"
            )
        self.interceptors = tuple(self.interceptors)
        for hook in self.interceptors:
            if not (callable(getattr(hook, "on_send", None))
                    or callable(getattr(hook, "on_acknowledgement", None))):
                raise ConfigurationError(
                    f"interceptor {hook!r} has neither an on_send nor an on_acknowledgement method"
                )
        self.idempotent = self._resolve_idempotence()
        self.security = build_security(self)
        return self

    def _resolve_idempotence(self) -> bool:
        conflicts = []
        if self.acks_value != -1:
            conflicts.append(f'acks={self.acks!r} (idempotence needs acks="all")')
        if self.max_in_flight_requests_per_connection > 5:
            conflicts.append(
                "max_in_flight_requests_per_connection="
                f"{self.max_in_flight_requests_per_connection} (idempotence allows at most 5)"
            )
        if self.retries == 0:
            conflicts.append("retries=0 (idempotence needs retries)")
        wanted = self.enable_idempotence
        if self.transactional_id is not None:
            if wanted is False:
                raise ConfigurationError("transactional_id requires enable_idempotence=True")
            wanted = True
        if wanted is None:
            return not conflicts
        if wanted and conflicts:
            raise ConfigurationError(
                "enable_idempotence=True conflicts with " + "; ".join(conflicts)
            )
        return bool(wanted)


def _parse_acks(acks: int | str) -> int:
    text = str(acks).strip().lower()
    if text in ("all", "-1"):
        return -1
    if text in ("0", "1"):
        return int(text)
    raise ConfigurationError(f'acks must be 0, 1 or "all" (-1), got {acks!r}')


# Java producer property -> ProducerConfig field.
JAVA_PROPERTY_NAMES: dict[str, str] = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "acks": "acks",
    "compression.type": "compression",
    "compression.level": "compression_level",
    "batch.size": "batch_size",
    "linger.ms": "linger_ms",
    "buffer.memory": "buffer_memory",
    "max.block.ms": "max_block_ms",
    "max.request.size": "max_request_size",
    "request.timeout.ms": "request_timeout_ms",
    "delivery.timeout.ms": "delivery_timeout_ms",
    "retries": "retries",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
    "enable.idempotence": "enable_idempotence",
    "transactional.id": "transactional_id",
    "transaction.timeout.ms": "transaction_timeout_ms",
    "partitioner.class": "partitioner",
    "key.serializer": "key_serializer",
    "value.serializer": "value_serializer",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "allow.auto.create.topics": "allow_auto_create_topics",
    "metrics.sample.window.ms": "metrics_sample_window_ms",
    "metrics.num.samples": "metrics_num_samples",
    "metadata.max.idle.ms": "metadata_max_idle_ms",
    "metadata.recovery.strategy": "metadata_recovery_strategy",
    "metadata.recovery.rebootstrap.trigger.ms": "metadata_recovery_rebootstrap_trigger_ms",
    "partitioner.adaptive.partitioning.enable": "partitioner_adaptive_partitioning",
    "partitioner.availability.timeout.ms": "partitioner_availability_timeout_ms",
    "partitioner.ignore.keys": "partitioner_ignore_keys",
}
# Per-codec levels (KIP-390) all map onto the one compression_level.
for _codec in ("gzip", "lz4", "zstd"):
    JAVA_PROPERTY_NAMES[f"compression.{_codec}.level"] = "compression_level"

JAVA_PROPERTY_NAMES.update(SECURITY_PROPERTY_NAMES)
_BOOLEAN_FIELDS = {
    "enable_idempotence",
    "allow_auto_create_topics",
    "ssl_check_hostname",
    "partitioner_adaptive_partitioning",
    "partitioner_ignore_keys",
    "metrics_enabled",
}

_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(ProducerConfig) if f.init}


def _coerce(prop: str, field_name: str, value: Any) -> Any:
    kind = str(_FIELD_TYPES[field_name])
    if not isinstance(value, str):
        return value
    text = value.strip()
    if field_name in _BOOLEAN_FIELDS:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigurationError(f"{prop} must be true or false, got {value!r}")
    if field_name in ("acks", "bootstrap_servers", "metadata_recovery_strategy"):
        return text
    if kind.startswith("int") and "str" not in kind:
        try:
            return int(text)
        except ValueError:
            raise ConfigurationError(f"{prop} must be an integer, got {value!r}") from None
    return text


def config_from_properties(props: Mapping[str, Any], **overrides: Any) -> ProducerConfig:
    """Build a config from Java property names (unknown names are an error)."""
    kwargs: dict[str, Any] = {}
    for prop, value in props.items():
        key = str(prop).strip()
        translated = translate_security_property(key, value)
        if translated is not None:
            kwargs.update(translated)
            continue
        field_name = JAVA_PROPERTY_NAMES.get(key)
        if field_name is None:
            raise ConfigurationError(_unknown_message(key, JAVA_PROPERTY_NAMES))
        kwargs[field_name] = _coerce(key, field_name, value)
    kwargs.update(overrides)
    return ProducerConfig(**kwargs).validate()


def _unknown_message(key: str, known: Iterable[str]) -> str:
    # The value is left out: it may be a secret in a mistyped property name.
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown producer property {key!r}{hint}"
