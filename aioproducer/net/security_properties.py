"""Java and librdkafka security property names, mapped onto producer arguments.

Most names map one to one (``security.protocol`` -> ``security_protocol``);
three need translation, done here:

* ``sasl.jaas.config`` (Java): ``PlainLoginModule`` / ``ScramLoginModule``
  carry ``username`` and ``password``; ``OAuthBearerLoginModule`` carries the
  KIP-768 ``clientId``, ``clientSecret`` and ``scope``.
* ``ssl.endpoint.identification.algorithm``: ``https`` turns the hostname
  check on, an empty value or ``none`` turns it off.
* ``ssl.truststore.type`` / ``ssl.keystore.type``: only ``PEM`` is readable
  by Python's ``ssl``; JKS and PKCS12 stores are refused with a hint.

Error messages name properties and option keys, never their values, since
those may be secrets.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError
from .jaas import parse_jaas_entry

__all__ = [
    "SECURITY_PROPERTY_NAMES",
    "TRANSLATED_PROPERTIES",
    "is_secret_property",
    "parse_jaas_config",
    "redact_properties",
    "translate_security_property",
]

SECURITY_PROPERTY_NAMES: dict[str, str] = {
    "security.protocol": "security_protocol",
    "ssl.ca.location": "ssl_cafile",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.oauthbearer.token.endpoint.url": "sasl_oauthbearer_token_endpoint_url",
    "sasl.oauthbearer.client.id": "sasl_oauthbearer_client_id",
    "sasl.oauthbearer.client.secret": "sasl_oauthbearer_client_secret",
    "sasl.oauthbearer.scope": "sasl_oauthbearer_scope",
}

# Properties translated by translate_security_property rather than renamed.
TRANSLATED_PROPERTIES = (
    "sasl.jaas.config",
    "ssl.endpoint.identification.algorithm",
    "ssl.truststore.type",
    "ssl.keystore.type",
    "sasl.oauthbearer.method",
    "sasl.login.callback.handler.class",
)

_LOGIN_MODULES = {
    "PlainLoginModule": {"username": "sasl_plain_username", "password": "sasl_plain_password"},
    "ScramLoginModule": {"username": "sasl_plain_username", "password": "sasl_plain_password"},
    "OAuthBearerLoginModule": {
        "clientId": "sasl_oauthbearer_client_id",
        "clientSecret": "sasl_oauthbearer_client_secret",
        "scope": "sasl_oauthbearer_scope",
    },
}


def is_secret_property(name: str) -> bool:
    """True for property names whose values are secrets (passwords, client secrets, JAAS)."""
    lowered = name.lower()
    return "password" in lowered or "secret" in lowered or lowered.endswith("jaas.config")


def redact_properties(props: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``props`` with secret values replaced by ``"***"``, for repr and logs."""
    return {k: "***" if is_secret_property(str(k)) else v for k, v in props.items()}


def parse_jaas_config(text: str) -> dict[str, str]:
    """Producer arguments from a ``sasl.jaas.config`` value.

    ``org.apache.kafka.common.security.plain.PlainLoginModule required
    username="alice" password="secret";`` -> ``{"sasl_plain_username":
    "alice", "sasl_plain_password": "secret"}``. The text is read as Kafka's
    ``JaasConfig`` reads it (:mod:`aioproducer.net.jaas`). Options other login
    modules use (``unsecuredLoginStringClaim_sub``...) are ignored.
    """
    entry = parse_jaas_entry(text)
    module = entry.module.rsplit(".", 1)[-1]
    mapping = _LOGIN_MODULES.get(module)
    if mapping is None:
        raise ConfigurationError(
            f"sasl.jaas.config: login module {module} is not supported "
            f"(supported: {', '.join(sorted(_LOGIN_MODULES))})"
        )
    return {field: entry.options[key] for key, field in mapping.items() if key in entry.options}


def translate_security_property(key: str, value: Any) -> dict[str, Any] | None:
    """Producer arguments for one security property, or None if ``key`` is not one."""
    if key in SECURITY_PROPERTY_NAMES:
        return {SECURITY_PROPERTY_NAMES[key]: value}
    if key not in TRANSLATED_PROPERTIES:
        return None
    text = "" if value is None else str(value).strip()
    if key == "sasl.jaas.config":
        return parse_jaas_config(text)
    if key == "ssl.endpoint.identification.algorithm":
        if text.lower() == "https":
            return {"ssl_check_hostname": True}
        if text.lower() in ("", "none"):
            return {"ssl_check_hostname": False}
        raise ConfigurationError(f"{key} must be https, none or empty, got {value!r}")
    if key in ("ssl.truststore.type", "ssl.keystore.type"):
        if text.upper() != "PEM":
            raise ConfigurationError(
                f"{key}={value!r} is not supported: give PEM files (convert a JKS or PKCS12 "
                f"store with keytool -exportcert / openssl pkcs12 -nodes)"
            )
        return {}
    if key == "sasl.login.callback.handler.class":
        # Java's KIP-768 set-up names its OIDC login handler; the token
        # endpoint URL selects the built-in provider here just the same.
        if text.endswith(".OAuthBearerLoginCallbackHandler"):
            return {}
        raise ConfigurationError(
            f"{key}: only Kafka's OAuthBearerLoginCallbackHandler is understood; for another "
            f"token source pass sasl_oauth_token_provider"
        )
    # sasl.oauthbearer.method: librdkafka's "oidc" selects the token endpoint,
    # which the endpoint URL already says; "default" needs nothing either.
    if text.lower() not in ("oidc", "default"):
        raise ConfigurationError(f"{key} must be oidc or default, got {value!r}")
    return {}
