"""Producer configuration: defaults, validation, and the Java property names.

:class:`ProducerConfig` holds every setting with the Java producer's defaults
and checks them together (``validate``), as ``ProducerConfig`` does in Java:
an inconsistent combination is a :class:`~aioproducer.errors.ConfigurationError`
at construction, never a surprise later. :func:`config_from_properties` maps
Java property names (``linger.ms``) onto ours (``linger_ms``), accepting the
string values that property files and Spark options carry, and the
security properties through :mod:`aioproducer.net.security_properties`
(``sasl.jaas.config``, librdkafka's ``ssl.ca.location``...).

Secrets (``sasl_plain_password``, ``ssl_password``,
``sasl_oauthbearer_client_secret``) are left out of ``repr``.
"""

from __future__ import annotations

import dataclasses
import difflib
import ssl
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from ..net.bootstrap import parse_bootstrap
from ..net.security import Security, build_security
from ..net.security_properties import (
    SECURITY_PROPERTY_NAMES,
    TRANSLATED_PROPERTIES,
    redact_properties,
    translate_security_property,
)
from ..protocol.compression import Codec, check_level, codec_from_name
from ..types import PartitionerFn, Serializer, TokenProvider
from .foreign_names import LIBRDKAFKA_PROPERTIES, PEER_SETTINGS

__all__ = [
    "JAVA_PROPERTY_NAMES",
    "ProducerConfig",
    "check_setting_names",
    "config_from_properties",
    "unknown_setting_message",
]

_INT32_MAX = 2**31 - 1


def _setting(default: Any, doc: str, java: str | None = None, *, secret: bool = False) -> Any:
    """A setting's field: its default, its one-line doc and its Java property.

    ``java`` is the Java producer property that :func:`config_from_properties`
    maps onto this setting, or None when Java has none of its own.
    """
    return dataclasses.field(default=default, repr=not secret, metadata={"doc": doc, "java": java})


class _Derived:
    """What ``validate`` derives from the settings: attributes, not settings (nor fields)."""

    acks_value: int = -1
    codec: Codec = Codec.NONE
    idempotent: bool = False
    security: Security = Security()


# The largest values of Java's INT and LONG setting types.
_INT32 = 2**31 - 1
_INT64 = 2**63 - 1


@dataclass
class ProducerConfig(_Derived):
    """Every producer setting, with the Java producer's defaults.

    Each field is a keyword of :class:`~aioproducer.Producer` and carries its
    documentation in ``field.metadata``: ``"doc"`` (one line, always there)
    and ``"java"`` (always there: the Java property ``from_config`` maps onto
    it, or None). ``field.type`` is the annotation as written, a string
    (``typing.get_type_hints(ProducerConfig)`` evaluates it); ``field.default``
    the default (no setting has a ``default_factory``). That is the one place
    a setting is described; the ``Producer`` signature and docstring are
    checked against it.
    """

    bootstrap_servers: str | Sequence[str] = _setting(
        "localhost:9092",
        'Brokers to start from: "host:port,host:port" or a list; IPv6 as [::1]:9092; '
        "a PLAINTEXT:// (SSL://...) prefix must agree with security_protocol.",
        "bootstrap.servers",
    )
    client_id: str | None = _setting(
        None,
        "Sent with every request and named in every log line; None: producer-1, producer-2...",
        "client.id",
    )
    acks: int | str = _setting(
        "all",
        'Replicas a write waits for: 0 (none), 1 (the leader), "all" (every in-sync one).',
        "acks",
    )
    compression: str = _setting(
        "none", 'Batch compression: "none", "gzip", "snappy", "lz4" or "zstd".', "compression.type"
    )
    compression_level: int | None = _setting(
        None,
        "Level of the compression codec (KIP-390; Java: compression.<codec>.level); "
        "None: the codec's default.",
    )
    batch_size: int = _setting(16384, "Upper bound of a batch's uncompressed bytes.", "batch.size")
    linger_ms: int = _setting(
        5, "How long a batch waits for more records before it is sent (ms).", "linger.ms"
    )
    buffer_memory: int = _setting(
        32 << 20,
        "Bound on the bytes of all records buffered and not yet acknowledged.",
        "buffer.memory",
    )
    max_block_ms: int = _setting(
        60000,
        "Longest wait of enqueue/send for metadata and buffer space, and of start() "
        "for the cluster (ms).",
        "max.block.ms",
    )
    max_request_size: int = _setting(
        1 << 20, "Largest request in bytes; a larger record is refused at once.", "max.request.size"
    )
    request_timeout_ms: int = _setting(
        30000,
        "A request unanswered this long closes its connection and is retried (ms).",
        "request.timeout.ms",
    )
    delivery_timeout_ms: int = _setting(
        120000,
        "Bound on a record's whole life, retries included (ms; KIP-91).",
        "delivery.timeout.ms",
    )
    retries: int = _setting(
        _INT32_MAX, "Retries of a retriable error (delivery_timeout_ms bounds them too).", "retries"
    )
    retry_backoff_ms: int = _setting(
        100,
        "First wait before a retry (ms); it doubles, with jitter, up to "
        "retry_backoff_max_ms (KIP-580).",
        "retry.backoff.ms",
    )
    retry_backoff_max_ms: int = _setting(
        1000, "Longest wait before a retry (ms).", "retry.backoff.max.ms"
    )
    max_in_flight_requests_per_connection: int = _setting(
        5,
        "Produce requests awaiting an answer per broker (at most 5 with idempotence).",
        "max.in.flight.requests.per.connection",
    )
    # None means "True unless acks/retries/max in flight conflict", as in Java 3.x.
    enable_idempotence: bool | None = _setting(
        None,
        "Write each record once per partition despite retries; None: on unless acks, "
        "retries or max_in_flight_requests_per_connection conflict.",
        "enable.idempotence",
    )
    transactional_id: str | None = _setting(
        None, "Enables transactions under this id (implies idempotence).", "transactional.id"
    )
    transaction_timeout_ms: int = _setting(
        60000,
        "How long the coordinator lets a transaction stay open before aborting it (ms).",
        "transaction.timeout.ms",
    )
    partitioner: PartitionerFn | None = _setting(
        None,
        "Callable (topic, key_bytes, num_partitions, available) -> partition; "
        "None: Kafka's default partitioner.",
        "partitioner.class",
    )
    key_serializer: Serializer | None = _setting(
        None,
        "Callable turning a key into bytes; None: keys must be bytes-like.",
        "key.serializer",
    )
    value_serializer: Serializer | None = _setting(
        None,
        "Callable turning a value into bytes; None: values must be bytes-like.",
        "value.serializer",
    )
    metadata_max_age_ms: int = _setting(
        300000, "Metadata is refreshed at least this often (ms).", "metadata.max.age.ms"
    )
    reconnect_backoff_ms: int = _setting(
        50,
        "First wait before reconnecting to a broker (ms); it doubles, with jitter, up to "
        "reconnect_backoff_max_ms.",
        "reconnect.backoff.ms",
    )
    reconnect_backoff_max_ms: int = _setting(
        1000, "Longest wait before reconnecting to a broker (ms).", "reconnect.backoff.max.ms"
    )
    connections_max_idle_ms: int = _setting(
        540000, "Connections idle this long are closed (ms).", "connections.max.idle.ms"
    )
    allow_auto_create_topics: bool = _setting(
        True, "Ask the broker to create topics that do not exist.", "allow.auto.create.topics"
    )
    metrics_enabled: bool = _setting(
        True, "Record the statistics of metrics(); False keeps only the gauges."
    )
    metrics_sample_window_ms: int = _setting(
        30000, "Length of one metrics sample window (ms).", "metrics.sample.window.ms"
    )
    metrics_num_samples: int = _setting(
        2, "Sample windows that rates and averages are computed over.", "metrics.num.samples"
    )
    interceptors: Sequence[Any] = _setting(
        (),
        "Objects with on_send and/or on_acknowledgement hooks, called in order "
        "(Java: interceptor.classes).",
    )
    metadata_max_idle_ms: int = _setting(
        300000,
        "A topic no record went to for this long leaves metadata refreshes (ms).",
        "metadata.max.idle.ms",
    )
    metadata_recovery_strategy: str = _setting(
        "rebootstrap",
        '"rebootstrap": start again from bootstrap_servers when no known broker '
        'answers (KIP-899) or a broker asks for it (KIP-1102); "none": never.',
        "metadata.recovery.strategy",
    )
    metadata_recovery_rebootstrap_trigger_ms: int = _setting(
        300000,
        "How long no known broker answers metadata before a rebootstrap (ms).",
        "metadata.recovery.rebootstrap.trigger.ms",
    )
    partitioner_adaptive_partitioning: bool = _setting(
        True,
        "Unkeyed records go less to partitions whose brokers fall behind (KIP-794).",
        "partitioner.adaptive.partitioning.enable",
    )
    partitioner_availability_timeout_ms: int = _setting(
        0,
        "With adaptive partitioning, skip partitions whose broker left batches unsent this "
        "long (ms; 0: never).",
        "partitioner.availability.timeout.ms",
    )
    partitioner_ignore_keys: bool = _setting(
        False,
        "Spread keyed records over partitions as unkeyed ones are.",
        "partitioner.ignore.keys",
    )
    security_protocol: str = _setting(
        "PLAINTEXT",
        '"PLAINTEXT", "SSL" (TLS), "SASL_PLAINTEXT" or "SASL_SSL".',
        "security.protocol",
    )
    ssl_context: ssl.SSLContext | None = _setting(
        None, "An ssl.SSLContext of your own; wins over the ssl_* file settings."
    )
    ssl_cafile: str | None = _setting(
        None,
        "PEM file of the CAs that sign the brokers' certificates; None: the system CAs.",
        "ssl.truststore.location",
    )
    ssl_certfile: str | None = _setting(
        None, "PEM client certificate, for mutual TLS.", "ssl.keystore.location"
    )
    ssl_keyfile: str | None = _setting(
        None, "PEM private key of ssl_certfile (librdkafka: ssl.key.location)."
    )
    ssl_password: str | None = _setting(
        None, "Password of ssl_keyfile.", "ssl.key.password", secret=True
    )
    ssl_check_hostname: bool = _setting(
        True,
        "Check each broker's certificate against its host name.",
        "ssl.endpoint.identification.algorithm",
    )
    sasl_mechanism: str | None = _setting(
        None, '"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" or "OAUTHBEARER".', "sasl.mechanism"
    )
    sasl_plain_username: str | None = _setting(
        None, "User name for PLAIN and SCRAM (Java: in sasl.jaas.config)."
    )
    sasl_plain_password: str | None = _setting(
        None, "Password for PLAIN and SCRAM (Java: in sasl.jaas.config).", secret=True
    )
    sasl_oauth_token_provider: TokenProvider | None = _setting(
        None,
        "OAUTHBEARER tokens from an object with async token() -> str; not with a token endpoint.",
    )
    sasl_oauthbearer_token_endpoint_url: str | None = _setting(
        None,
        "OAUTHBEARER tokens from this OIDC endpoint, by client credentials (KIP-768).",
        "sasl.oauthbearer.token.endpoint.url",
    )
    sasl_oauthbearer_client_id: str | None = _setting(
        None, "Client id at the token endpoint (Java: clientId in sasl.jaas.config)."
    )
    sasl_oauthbearer_client_secret: str | None = _setting(
        None,
        "Client secret at the token endpoint (Java: clientSecret in sasl.jaas.config).",
        secret=True,
    )
    sasl_oauthbearer_scope: str | None = _setting(
        None, "Scope asked of the token endpoint (Java: scope in sasl.jaas.config)."
    )

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], **overrides: Any) -> ProducerConfig:
        """A checked config from Java producer properties (``{"linger.ms": "5", ...}``).

        What :meth:`Producer.from_config <aioproducer.Producer.from_config>` builds,
        without a producer: an unknown name or a bad value is a ConfigurationError.
        ``overrides`` are settings by their Python names and win over ``properties``.
        """
        return config_from_properties(properties, **overrides)

    @staticmethod
    def redact_properties(properties: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of Java producer ``properties`` with secret values (passwords,
        ``sasl.jaas.config``...) replaced by ``"***"``, for reprs and logs."""
        return redact_properties(dict(properties))

    def validate(self) -> ProducerConfig:
        """Check every setting and the combinations; fill the derived fields."""
        self.acks_value = _parse_acks(self.acks)
        try:
            self.codec = codec_from_name(self.compression)
        except ValueError as exc:
            raise ConfigurationError(f"compression: {exc}") from None
        try:
            # Here rather than when the first batch is compressed, where a
            # level the codec refuses would fail every batch.
            check_level(self.codec, self.compression_level)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"compression_level: {exc}") from None
        # Java's types bound them: an INT setting is an int32, a LONG one an int64
        # (batch.size and max.request.size feed int32 fields of the protocol).
        for name, low, high in (
            ("batch_size", 1, _INT32),
            ("linger_ms", 0, _INT64),
            ("buffer_memory", 1, _INT64),
            ("max_block_ms", 0, _INT64),
            ("max_request_size", 1, _INT32),
            ("request_timeout_ms", 1, _INT32),
            ("delivery_timeout_ms", 1, _INT32),
            ("retries", 0, _INT32),
            ("retry_backoff_ms", 0, _INT64),
            ("retry_backoff_max_ms", 0, _INT64),
            ("max_in_flight_requests_per_connection", 1, _INT32),
            ("transaction_timeout_ms", 1, _INT32),
            ("metadata_max_age_ms", 0, _INT64),
            ("reconnect_backoff_ms", 0, _INT64),
            ("reconnect_backoff_max_ms", 0, _INT64),
            ("connections_max_idle_ms", 1, _INT64),
            ("metrics_sample_window_ms", 1, _INT64),
            ("metrics_num_samples", 1, _INT32),
            ("metadata_max_idle_ms", 1, _INT64),
            ("metadata_recovery_rebootstrap_trigger_ms", 0, _INT64),
            ("partitioner_availability_timeout_ms", 0, _INT64),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(
                    f"{name} must be an integer from {low} to {high}, got {value!r}"
                )
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            # Java: delivery.timeout.ms should be >= linger.ms + request.timeout.ms
            raise ConfigurationError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be at least "
                f"linger_ms + request_timeout_ms ({self.linger_ms + self.request_timeout_ms})"
            )
        for name in (
            "allow_auto_create_topics",
            "partitioner_adaptive_partitioning",
            "partitioner_ignore_keys",
            "metrics_enabled",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ConfigurationError(
                'metadata_recovery_strategy must be "rebootstrap" or "none", '
                f"got {self.metadata_recovery_strategy!r}"
            )
        for name in ("partitioner", "key_serializer", "value_serializer"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise ConfigurationError(f"{name} must be callable, got {value!r}")
        if isinstance(self.interceptors, (str, bytes)) or not isinstance(
            self.interceptors, Iterable
        ):
            raise ConfigurationError(
                f"interceptors must be a list of objects, got {self.interceptors!r}"
            )
        self.interceptors = tuple(self.interceptors)
        for hook in self.interceptors:
            if not (
                callable(getattr(hook, "on_send", None))
                or callable(getattr(hook, "on_acknowledgement", None))
            ):
                raise ConfigurationError(
                    f"interceptor {hook!r} has neither an on_send nor an on_acknowledgement method"
                )
        self.idempotent = self._resolve_idempotence()
        self.security = build_security(self)
        if not isinstance(self.bootstrap_servers, str):
            # A list of its own: the caller's may change after this check.
            self.bootstrap_servers = list(self.bootstrap_servers)
        parse_bootstrap(self.bootstrap_servers, self.security.protocol)
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


# Java producer property -> ProducerConfig field: the fields' own Java names
# (those translate_security_property does not translate), then the aliases.
JAVA_PROPERTY_NAMES: dict[str, str] = {
    f.metadata["java"]: f.name
    for f in dataclasses.fields(ProducerConfig)
    if f.metadata["java"] is not None and f.metadata["java"] not in TRANSLATED_PROPERTIES
}
# librdkafka's one level, and Java's per-codec levels (KIP-390), all map onto compression_level.
JAVA_PROPERTY_NAMES["compression.level"] = "compression_level"
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

_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(ProducerConfig)}


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


# Java properties that name what this producer always does: accepted with that
# value (property files carry them), refused with any other.
_FIXED_BEHAVIOUR = {
    # asyncio's open_connection tries every address getaddrinfo returns, in
    # turn (KIP-602's default); the canonical-name variant serves Kerberos.
    "client.dns.lookup": "use_all_dns_ips",
}


def config_from_properties(props: Mapping[str, Any], **overrides: Any) -> ProducerConfig:
    """Build a config from Java property names (unknown names are an error)."""
    kwargs: dict[str, Any] = {}
    for prop, value in props.items():
        key = str(prop).strip()
        translated = translate_security_property(key, value)
        if translated is not None:
            kwargs.update(translated)
            continue
        if key in _FIXED_BEHAVIOUR:
            if str(value).strip().lower() != _FIXED_BEHAVIOUR[key]:
                raise ConfigurationError(
                    f"{key}={value!r} is not supported: this producer always does "
                    f"{_FIXED_BEHAVIOUR[key]}"
                )
            continue
        field_name = JAVA_PROPERTY_NAMES.get(key)
        if field_name is None:
            raise ConfigurationError(
                _unknown_message(key, [*JAVA_PROPERTY_NAMES, *_FIXED_BEHAVIOUR])
            )
        kwargs[field_name] = _coerce(key, field_name, value)
    check_setting_names(overrides)
    kwargs.update(overrides)
    return ProducerConfig(**kwargs).validate()


def unknown_setting_message(name: str) -> str:
    """Why ``name`` is not a keyword of ``Producer``, and what was probably meant.

    A Java property name (``linger.ms``) gets the setting it maps onto and a
    pointer to ``Producer.from_config``. Values are never quoted: a mistyped
    name may carry a secret.
    """
    if "." in name:
        field_name = JAVA_PROPERTY_NAMES.get(name)
        if field_name is not None:
            return (
                f"{name!r} is a Java property name: pass {field_name}=..., or give Java "
                f"property names to Producer.from_config({{{name!r}: ...}})"
            )
        if name in TRANSLATED_PROPERTIES:
            return f"{name!r} is a Java property name: give it to Producer.from_config"
        close = difflib.get_close_matches(name, list(JAVA_PROPERTY_NAMES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (
            f"unknown producer setting {name!r}: Java property names{hint} "
            f"go to Producer.from_config"
        )
    if name in PEER_SETTINGS:
        return f"unknown producer setting {name!r}: {PEER_SETTINGS[name]}"
    settings = [f.name for f in dataclasses.fields(ProducerConfig)]
    close = difflib.get_close_matches(name, settings, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown producer setting {name!r}{hint}"


def check_setting_names(names: Iterable[str]) -> None:
    """ConfigurationError for the first of ``names`` that is not a setting."""
    for name in names:
        if name not in _FIELD_TYPES:
            raise ConfigurationError(unknown_setting_message(name))


def _unknown_message(key: str, known: Iterable[str]) -> str:
    # The value is left out: it may be a secret in a mistyped property name.
    if key in LIBRDKAFKA_PROPERTIES:
        return f"unknown producer property {key!r}: {LIBRDKAFKA_PROPERTIES[key]}"
    close = difflib.get_close_matches(key, list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown producer property {key!r}{hint}"
