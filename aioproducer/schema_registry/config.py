"""Confluent's Schema Registry client properties, as keyword arguments of the client.

Both spellings are accepted: with the ``schema.registry.`` prefix, as the
librdkafka-based clients and producer configurations write them
(``schema.registry.url``, ``schema.registry.ssl.ca.location``), and without it,
as confluent-kafka-python's ``SchemaRegistryClient`` takes them (``url``,
``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``,
``ssl.key.password``); the prefix is dropped before lookup. TLS files are PEM:
the Java clients' key and trust stores (``ssl.keystore.*``) are not read.
An unknown property is a ConfigurationError naming it, so that a misspelt
``basic.auth.user.info`` does not silently mean "no credentials".
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError

__all__ = ["PREFIX", "PROPERTIES", "client_kwargs", "ssl_context"]

PROPERTIES = frozenset(
    {
        "url",
        "basic.auth.user.info",
        "basic.auth.credentials.source",
        "bearer.auth.token",
        "bearer.auth.credentials.source",
        "bearer.auth.logical.cluster",
        "bearer.auth.identity.pool.id",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "request.timeout.ms",
        "timeout",
        "max.retries",
        "retries.wait.ms",
        "retries.max.wait.ms",
        "latest.cache.ttl.secs",
        "cache.latest.ttl.sec",
        "cache.capacity",
    }
)
#: The prefix Confluent's clients put before a registry property name (optional here).
PREFIX = "schema.registry."


def _int(conf: Mapping[str, Any], name: str) -> int:
    value = conf[name]
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}") from None


def _seconds(conf: Mapping[str, Any], name: str, *, zero: bool = False) -> float:
    value = conf[name]
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}") from None
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not zero):
        raise ConfigurationError(f"{name} must be {'>=' if zero else '>'} 0 seconds, got {value!r}")
    return seconds


def ssl_context(props: Mapping[str, Any]) -> ssl.SSLContext | None:
    """An SSL context from ``ssl.*`` properties, or None when none is set."""
    ca = props.get("ssl.ca.location")
    cert = props.get("ssl.certificate.location")
    key = props.get("ssl.key.location")
    algorithm = props.get("ssl.endpoint.identification.algorithm")
    if ca is None and cert is None and key is None and algorithm is None:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    if cert is not None:
        ctx.load_cert_chain(cert, key, props.get("ssl.key.password"))
    elif key is not None:
        raise ConfigurationError("ssl.key.location is set without ssl.certificate.location")
    if algorithm is not None and str(algorithm).lower() in ("", "none"):
        # Java's empty endpoint.identification.algorithm: no hostname check.
        ctx.check_hostname = False
    return ctx


def client_kwargs(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of SchemaRegistryClient from Confluent's property names."""
    props: dict[str, Any] = {}
    for name, value in conf.items():
        short = name.removeprefix(PREFIX)
        if short not in PROPERTIES:
            raise ConfigurationError(
                f"unknown Schema Registry property {name!r}; known: "
                + ", ".join(sorted(PREFIX + p if p == "url" else p for p in PROPERTIES))
            )
        props[short] = value
    if "url" not in props:
        raise ConfigurationError("schema.registry.url is required")
    urls = [u.strip() for u in str(props["url"]).split(",") if u.strip()]
    kwargs: dict[str, Any] = {"url": urls}
    source = str(props.get("basic.auth.credentials.source", "USER_INFO")).upper()
    if source not in ("USER_INFO", "URL"):
        raise ConfigurationError(
            f"basic.auth.credentials.source {source!r} is not supported (USER_INFO or URL)"
        )
    if source == "USER_INFO" and "basic.auth.user.info" in props:
        user, sep, password = str(props["basic.auth.user.info"]).partition(":")
        if not sep:
            # The value is a secret: name the property, never echo it.
            raise ConfigurationError("basic.auth.user.info must be of the form 'user:password'")
        kwargs["basic_auth"] = (user, password)
    bearer_source = str(props.get("bearer.auth.credentials.source", "STATIC_TOKEN")).upper()
    if "bearer.auth.token" in props:
        if bearer_source != "STATIC_TOKEN":
            raise ConfigurationError(
                f"bearer.auth.credentials.source {bearer_source!r} is not supported (STATIC_TOKEN)"
            )
        kwargs["bearer_token"] = str(props["bearer.auth.token"])
        kwargs["bearer_logical_cluster"] = props.get("bearer.auth.logical.cluster")
        kwargs["bearer_identity_pool"] = props.get("bearer.auth.identity.pool.id")
    ctx = ssl_context(props)
    if ctx is not None:
        kwargs["ssl"] = ctx
    if "request.timeout.ms" in props:
        kwargs["timeout_s"] = _int(props, "request.timeout.ms") / 1000
    elif "timeout" in props:  # confluent-kafka-python's name, in seconds
        kwargs["timeout_s"] = _seconds(props, "timeout")
    if "max.retries" in props:
        kwargs["max_retries"] = _int(props, "max.retries")
    if "retries.wait.ms" in props:
        kwargs["retry_backoff_s"] = _int(props, "retries.wait.ms") / 1000
    if "retries.max.wait.ms" in props:
        kwargs["retry_backoff_max_s"] = _int(props, "retries.max.wait.ms") / 1000
    if "latest.cache.ttl.secs" in props:
        kwargs["latest_ttl_s"] = float(_int(props, "latest.cache.ttl.secs"))
    elif "cache.latest.ttl.sec" in props:  # confluent-kafka-python's name
        kwargs["latest_ttl_s"] = _seconds(props, "cache.latest.ttl.sec", zero=True)
    if "cache.capacity" in props:
        kwargs["cache_capacity"] = _int(props, "cache.capacity")
    return kwargs
