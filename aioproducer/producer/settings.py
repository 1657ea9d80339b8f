"""The constructor of :class:`~aioproducer.Producer`: every setting a typed keyword.

Each field of :class:`~aioproducer.config.ProducerConfig` is a parameter of
``Producer.__init__``, keyword-only but ``bootstrap_servers``, with its type
and default, so ``help()``, IDEs and type checkers see the settings (mypy
flags ``Producer(lingr_ms=5)`` and ``Producer(linger_ms="5")``). The
signature and the ``Args`` of the docstring copy the fields' names, types,
defaults and one-line docs; tests/unit/test_settings.py keeps them equal.
A setting is added or described in ``ProducerConfig``, nowhere else.

A keyword that is not a setting would be a bare TypeError from Python. It is
a ConfigurationError naming the closest setting instead (a Java property
name, ``linger.ms``, points to :meth:`~ProducerConstructor.from_config`),
raised by ``__new__``, which runs before ``__init__`` with the same
arguments. ``__new__`` sits in a base class of its own, so that what tools
read is ``__init__``: mypy checks a call against the nearer of the two in
the MRO, pyright against both (and this ``__new__`` takes anything), and
``inspect.signature`` (``help()``, IPython) shows the nearer one. A
``**unknown`` parameter on ``__init__`` would have done the same at run
time, but it would show in the signature, and type checkers would accept
any keyword (or, typed ``Never``, report it as a wrong type, not a wrong name).
"""

from __future__ import annotations

import inspect
import ssl
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..config import (
    ProducerConfig,
    config_from_properties,
    unknown_setting_message,
)
from ..errors import ConfigurationError
from ..types import PartitionerFn, Serializer, TokenProvider

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ProducerConstructor"]


def _keywords(cls: type) -> frozenset[str]:
    """The keywords ``cls.__init__`` takes.

    Read from the signature, not from ProducerConfig: a subclass may take
    more. One with ``**kwargs`` is taken to pass them on to Producer.
    """
    # Read, never called: mypy flags any __init__ taken from a class object.
    parameters = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]  # read
    names = frozenset(
        p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        names |= _keywords(ProducerConstructor)
    return names


class _SettingsGuard:
    """Makes a call ``__init__`` would refuse with a TypeError a ConfigurationError."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if len(args) > 1:
            raise ConfigurationError(
                f"{cls.__name__}() takes one positional argument, bootstrap_servers; "
                f"give the other settings by name (linger_ms=5)"
            )
        if args and "bootstrap_servers" in kwargs:
            raise ConfigurationError("bootstrap_servers given twice, by position and by name")
        if kwargs:
            known = _keywords(cls)
            for name in kwargs:
                if name not in known:
                    raise ConfigurationError(unknown_setting_message(name))
        return super().__new__(cls)


class ProducerConstructor(_SettingsGuard):
    """The two ways to build a :class:`~aioproducer.Producer`; not used on its own."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "localhost:9092",
        *,
        client_id: str | None = None,
        acks: int | str = "all",
        compression: str = "none",
        compression_level: int | None = None,
        batch_size: int = 16384,
        linger_ms: int = 5,
        buffer_memory: int = 32 << 20,
        max_block_ms: int = 60000,
        max_request_size: int = 1 << 20,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        retries: int = 2**31 - 1,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        max_in_flight_requests_per_connection: int = 5,
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        partitioner: PartitionerFn | None = None,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        metadata_max_age_ms: int = 300000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        connections_max_idle_ms: int = 540000,
        allow_auto_create_topics: bool = True,
        metrics_enabled: bool = True,
        metrics_sample_window_ms: int = 30000,
        metrics_num_samples: int = 2,
        interceptors: Sequence[Any] = (),
        metadata_max_idle_ms: int = 300000,
        metadata_recovery_strategy: str = "rebootstrap",
        metadata_recovery_rebootstrap_trigger_ms: int = 300000,
        partitioner_adaptive_partitioning: bool = True,
        partitioner_availability_timeout_ms: int = 0,
        partitioner_ignore_keys: bool = False,
        security_protocol: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_password: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        sasl_oauth_token_provider: TokenProvider | None = None,
        sasl_oauthbearer_token_endpoint_url: str | None = None,
        sasl_oauthbearer_client_id: str | None = None,
        sasl_oauthbearer_client_secret: str | None = None,
        sasl_oauthbearer_scope: str | None = None,
    ) -> None:
        """A producer with these settings; nothing connects before ``start()``.

        Settings are checked together here: a bad value or combination is a
        ConfigurationError, as is a name that is no setting. Java property
        names (``linger.ms``) go to :meth:`from_config`.

        Args:
            bootstrap_servers: Brokers to start from: "host:port,host:port" or a list; IPv6 as
                [::1]:9092; a PLAINTEXT:// (SSL://...) prefix must agree with security_protocol.
            client_id: Sent with every request and named in every log line; None: producer-1,
                producer-2...
            acks: Replicas a write waits for: 0 (none), 1 (the leader), "all" (every in-sync one).
            compression: Batch compression: "none", "gzip", "snappy", "lz4" or "zstd".
            compression_level: Level of the compression codec (KIP-390; Java:
                compression.<codec>.level); None: the codec's default.
            batch_size: Upper bound of a batch's uncompressed bytes.
            linger_ms: How long a batch waits for more records before it is sent (ms).
            buffer_memory: Bound on the bytes of all records buffered and not yet acknowledged.
            max_block_ms: Longest wait of enqueue/send for metadata and buffer space, and of start()
                for the cluster (ms).
            max_request_size: Largest request in bytes; a larger record is refused at once.
            request_timeout_ms: A request unanswered this long closes its connection and is retried
                (ms).
            delivery_timeout_ms: Bound on a record's whole life, retries included (ms; KIP-91).
            retries: Retries of a retriable error (delivery_timeout_ms bounds them too).
            retry_backoff_ms: First wait before a retry (ms); it doubles, with jitter, up to
                retry_backoff_max_ms (KIP-580).
            retry_backoff_max_ms: Longest wait before a retry (ms).
            max_in_flight_requests_per_connection: Produce requests awaiting an answer per broker
                (at most 5 with idempotence).
            enable_idempotence: Write each record once per partition despite retries; None: on
                unless acks, retries or max_in_flight_requests_per_connection conflict.
            transactional_id: Enables transactions under this id (implies idempotence).
            transaction_timeout_ms: How long the coordinator lets a transaction stay open before
                aborting it (ms).
            partitioner: Callable (topic, key_bytes, num_partitions, available) -> partition; None:
                Kafka's default partitioner.
            key_serializer: Callable turning a key into bytes; None: keys must be bytes-like.
            value_serializer: Callable turning a value into bytes; None: values must be bytes-like.
            metadata_max_age_ms: Metadata is refreshed at least this often (ms).
            reconnect_backoff_ms: First wait before reconnecting to a broker (ms); it doubles, with
                jitter, up to reconnect_backoff_max_ms.
            reconnect_backoff_max_ms: Longest wait before reconnecting to a broker (ms).
            connections_max_idle_ms: Connections idle this long are closed (ms).
            allow_auto_create_topics: Ask the broker to create topics that do not exist.
            metrics_enabled: Record the statistics of metrics(); False keeps only the gauges.
            metrics_sample_window_ms: Length of one metrics sample window (ms).
            metrics_num_samples: Sample windows that rates and averages are computed over.
            interceptors: Objects with on_send and/or on_acknowledgement hooks, called in order
                (Java: interceptor.classes).
            metadata_max_idle_ms: A topic no record went to for this long leaves metadata refreshes
                (ms).
            metadata_recovery_strategy: "rebootstrap": start again from bootstrap_servers when no
                known broker answers (KIP-899) or a broker asks for it (KIP-1102); "none": never.
            metadata_recovery_rebootstrap_trigger_ms: How long no known broker answers metadata
                before a rebootstrap (ms).
            partitioner_adaptive_partitioning: Unkeyed records go less to partitions whose brokers
                fall behind (KIP-794).
            partitioner_availability_timeout_ms: With adaptive partitioning, skip partitions whose
                broker left batches unsent this long (ms; 0: never).
            partitioner_ignore_keys: Spread keyed records over partitions as unkeyed ones are.
            security_protocol: "PLAINTEXT", "SSL" (TLS), "SASL_PLAINTEXT" or "SASL_SSL".
            ssl_context: An ssl.SSLContext of your own; wins over the ssl_* file settings.
            ssl_cafile: PEM file of the CAs that sign the brokers' certificates; None: the system
                CAs.
            ssl_certfile: PEM client certificate, for mutual TLS.
            ssl_keyfile: PEM private key of ssl_certfile (librdkafka: ssl.key.location).
            ssl_password: Password of ssl_keyfile.
            ssl_check_hostname: Check each broker's certificate against its host name.
            sasl_mechanism: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" or "OAUTHBEARER".
            sasl_plain_username: User name for PLAIN and SCRAM (Java: in sasl.jaas.config).
            sasl_plain_password: Password for PLAIN and SCRAM (Java: in sasl.jaas.config).
            sasl_oauth_token_provider: OAUTHBEARER tokens from an object with async token() -> str;
                not with a token endpoint.
            sasl_oauthbearer_token_endpoint_url: OAUTHBEARER tokens from this OIDC endpoint, by
                client credentials (KIP-768).
            sasl_oauthbearer_client_id: Client id at the token endpoint (Java: clientId in
                sasl.jaas.config).
            sasl_oauthbearer_client_secret: Client secret at the token endpoint (Java: clientSecret
                in sasl.jaas.config).
            sasl_oauthbearer_scope: Scope asked of the token endpoint (Java: scope in
                sasl.jaas.config).
        """
        # The parameters, and nothing else yet: each is a ProducerConfig field.
        settings = dict(locals())
        del settings["self"]
        self._init(ProducerConfig(**settings).validate())

    @classmethod
    def from_config(cls, properties: Mapping[str, Any], **overrides: Any) -> Self:
        """A producer from Java producer properties (``{"linger.ms": 5, ...}``).

        Values may be strings, as in a properties file; ``overrides`` are
        settings by their Python names and win over ``properties``.
        """
        producer = cls.__new__(cls)
        producer._init(config_from_properties(properties, **overrides))
        return producer

    def _init(self, config: ProducerConfig) -> None:
        raise NotImplementedError
