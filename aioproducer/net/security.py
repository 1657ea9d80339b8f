"""Security settings: check them together and build what connections use.

:func:`build_security` turns the ``security_protocol``, ``ssl_*`` and
``sasl_*`` settings of a producer's configuration into a
:class:`Security`: the ``ssl.SSLContext`` every connection wraps its socket
in (or None), and the :class:`~aioproducer.sasl.SaslCredentials` every
connection authenticates with (or None). Anything inconsistent or unreadable
is a :class:`~aioproducer.errors.ConfigurationError` here, at construction:
a mechanism missing for SASL, a password missing for PLAIN/SCRAM, a
certificate file that does not exist or does not parse. Messages never quote
a secret.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import ConfigurationError
from ..sasl.credentials import SaslCredentials
from ..sasl.oidc import ClientCredentialsTokenProvider
from ..sasl.registry import REGISTRY, mechanism_for
from ..types import TokenProvider


class SecuritySettings(Protocol):
    """The settings :func:`build_security` reads (a ``ProducerConfig`` has them all).

    A protocol rather than an import of ``config``, which imports this
    module: the arrows run one way.
    """

    security_protocol: str
    ssl_context: Any
    ssl_cafile: str | None
    ssl_certfile: str | None
    ssl_keyfile: str | None
    ssl_password: str | None
    ssl_check_hostname: bool
    sasl_mechanism: str | None
    sasl_plain_username: str | None
    sasl_plain_password: str | None
    sasl_oauth_token_provider: TokenProvider | None
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: str | None
    sasl_oauthbearer_scope: str | None


__all__ = ["SECURITY_PROTOCOLS", "Security", "build_security", "build_ssl_context"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SSL_FILE_FIELDS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password")
_SASL_FIELDS = (
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
    "sasl_oauth_token_provider",
    "sasl_oauthbearer_token_endpoint_url",
    "sasl_oauthbearer_client_id",
    "sasl_oauthbearer_client_secret",
    "sasl_oauthbearer_scope",
)


@dataclass(frozen=True)
class Security:
    """What every broker connection does before its first request."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)
    sasl: SaslCredentials | None = None


def build_ssl_context(
    cafile: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client context: system CAs (or ``cafile``), a client certificate for mTLS."""
    for name, path in (
        ("ssl_cafile", cafile),
        ("ssl_certfile", certfile),
        ("ssl_keyfile", keyfile),
    ):
        if path is not None and not os.path.isfile(path):
            raise ConfigurationError(f"{name}: no such file: {path!r}")
    try:
        context = ssl.create_default_context(cafile=cafile)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigurationError(
            f"ssl_cafile {cafile!r} holds no usable PEM certificate: {exc}"
        ) from None
    if certfile is not None:
        _load_cert_chain(context, certfile, keyfile, password)
    elif keyfile is not None:
        raise ConfigurationError("ssl_keyfile needs ssl_certfile (the client certificate)")
    context.check_hostname = check_hostname
    return context


class _KeyNeedsPassword(Exception):
    """Raised by the password callback: the key is encrypted and no ssl_password was given."""


def _load_cert_chain(
    context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str | None
) -> None:
    """``load_cert_chain`` that never prompts: an encrypted key needs ``ssl_password``.

    Given no password, OpenSSL asks for one on the terminal ("Enter PEM pass
    phrase:", blocking forever) or fails with a bare OSError without one. A
    callback answers instead; OpenSSL calls it only for an encrypted key.
    """
    key = keyfile if keyfile is not None else certfile
    key_setting = "ssl_keyfile" if keyfile is not None else "ssl_certfile"
    asked = False

    def supply_password() -> str:
        nonlocal asked
        asked = True
        if password is None:
            raise _KeyNeedsPassword
        return password

    problem: str | None = None
    try:
        context.load_cert_chain(certfile, keyfile, supply_password)
    except _KeyNeedsPassword:
        problem = (
            f"{key_setting} {key!r} holds an encrypted private key: set ssl_password "
            f"(ssl.key.password) to its pass phrase"
        )
    except ssl.SSLError as exc:
        # The password is never part of OpenSSL's message.
        reason = str(exc.reason or exc)
        if asked and "MISMATCH" not in reason.upper():
            problem = (
                f"ssl_password does not decrypt the private key in {key_setting} {key!r} ({reason})"
            )
        else:
            problem = (
                f"ssl_certfile {certfile!r} / ssl_keyfile {key!r} could not be loaded "
                f"(not PEM, or the key does not match the certificate): {reason}"
            )
    except OSError as exc:
        problem = f"ssl_certfile {certfile!r} / ssl_keyfile {key!r} could not be read: {exc.strerror or exc}"
    if problem is not None:
        # Raised here, outside the handlers: no OpenSSL error chained to it.
        raise ConfigurationError(problem)


def build_security(config: SecuritySettings) -> Security:
    """Check the security settings of ``config`` together; build the context and credentials."""
    protocol = str(config.security_protocol).strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigurationError(
            f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
            f"got {config.security_protocol!r}"
        )
    uses_ssl = protocol in ("SSL", "SASL_SSL")
    uses_sasl = protocol.startswith("SASL_")
    if not isinstance(config.ssl_check_hostname, bool):
        raise ConfigurationError(
            f"ssl_check_hostname must be True or False, got {config.ssl_check_hostname!r}"
        )
    context: ssl.SSLContext | None = None
    if uses_ssl:
        if config.ssl_context is not None:
            if not isinstance(config.ssl_context, ssl.SSLContext):
                raise ConfigurationError("ssl_context must be an ssl.SSLContext")
            context = config.ssl_context
        else:
            context = build_ssl_context(
                config.ssl_cafile,
                config.ssl_certfile,
                config.ssl_keyfile,
                config.ssl_password,
                config.ssl_check_hostname,
            )
    else:
        given = [n for n in ("ssl_context", *_SSL_FILE_FIELDS) if getattr(config, n) is not None]
        if given:
            raise ConfigurationError(
                f"{', '.join(given)} given but security_protocol is {protocol}: "
                f"use SSL or SASL_SSL to connect with TLS"
            )
    sasl: SaslCredentials | None = None
    if uses_sasl:
        sasl = _sasl_credentials(config)
    else:
        given = [n for n in _SASL_FIELDS if getattr(config, n) is not None]
        if given:
            raise ConfigurationError(
                f"{', '.join(given)} given but security_protocol is {protocol}: "
                f"use SASL_SSL or SASL_PLAINTEXT to authenticate with SASL"
            )
    return Security(protocol, context, sasl)


def _sasl_credentials(config: SecuritySettings) -> SaslCredentials:
    protocol = config.security_protocol
    mechanism = config.sasl_mechanism
    if not mechanism:
        raise ConfigurationError(
            f"security_protocol={protocol} needs sasl_mechanism (one of {', '.join(REGISTRY)})"
        )
    entry = mechanism_for(mechanism)
    mechanism = entry.name
    if entry.settings == "password":
        oauth = [
            n for n in _SASL_FIELDS if n.startswith("sasl_oauth") and getattr(config, n) is not None
        ]
        if oauth:
            raise ConfigurationError(f"{', '.join(oauth)} only apply to sasl_mechanism=OAUTHBEARER")
        if not config.sasl_plain_username:
            raise ConfigurationError(f"sasl_mechanism={mechanism} needs sasl_plain_username")
        if not config.sasl_plain_password:
            raise ConfigurationError(f"sasl_mechanism={mechanism} needs sasl_plain_password")
        if entry.check_password is not None:
            entry.check_password(config.sasl_plain_username, config.sasl_plain_password)
        return SaslCredentials(mechanism, config.sasl_plain_username, config.sasl_plain_password)
    if config.sasl_plain_username is not None or config.sasl_plain_password is not None:
        raise ConfigurationError(
            f"sasl_plain_username/sasl_plain_password do not apply to {mechanism}; "
            "give sasl_oauth_token_provider or the sasl_oauthbearer_* token endpoint settings"
        )
    provider = config.sasl_oauth_token_provider
    endpoint = config.sasl_oauthbearer_token_endpoint_url
    if provider is not None and endpoint is not None:
        raise ConfigurationError(
            "give either sasl_oauth_token_provider or sasl_oauthbearer_token_endpoint_url, not both"
        )
    if provider is not None:
        if not isinstance(provider, TokenProvider):
            raise ConfigurationError(
                "sasl_oauth_token_provider must have an `async def token(self) -> str` method"
            )
        return SaslCredentials(mechanism, token_provider=provider)
    if endpoint is None:
        raise ConfigurationError(
            f"sasl_mechanism={mechanism} needs sasl_oauth_token_provider or "
            "sasl_oauthbearer_token_endpoint_url (with client id and secret)"
        )
    if not config.sasl_oauthbearer_client_id or not config.sasl_oauthbearer_client_secret:
        raise ConfigurationError(
            "sasl_oauthbearer_token_endpoint_url needs sasl_oauthbearer_client_id "
            "and sasl_oauthbearer_client_secret"
        )
    provider = ClientCredentialsTokenProvider(
        endpoint,
        config.sasl_oauthbearer_client_id,
        config.sasl_oauthbearer_client_secret,
        config.sasl_oauthbearer_scope,
    )
    return SaslCredentials(mechanism, token_provider=provider)
