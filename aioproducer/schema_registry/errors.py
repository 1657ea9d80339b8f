"""Errors of the Schema Registry client and the schema-aware serializers.

All of them are :class:`~aioproducer.errors.SerializationError`: they reach a
caller of ``send``/``enqueue`` when a value's schema cannot be resolved or the
value does not fit it, and nothing is buffered. Messages name the registry by
its address without credentials (user info is stripped from URLs) and never
carry a password or token.
"""

from __future__ import annotations

from ..errors import SerializationError

__all__ = [
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "SchemaNotFoundError",
    "SchemaRegistryAuthError",
    "SchemaRegistryError",
    "SchemaRegistryTLSError",
    "SchemaRegistryUnavailableError",
    "SchemaValidationError",
    "SubjectNotFoundError",
    "VersionNotFoundError",
]


class SchemaRegistryError(SerializationError):
    """The Schema Registry answered with an error, or could not be asked.

    ``status`` is the HTTP status (None when no answer came), ``error_code`` the
    registry's own code from the body (e.g. 40401), when it gave one.
    """

    description = "Schema Registry request failed"

    def __init__(
        self, message: str, *, status: int | None = None, error_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """No answer (connection refused, timeout) or 5xx after every retry."""

    description = "Schema Registry unreachable"


class SchemaRegistryTLSError(SchemaRegistryUnavailableError):
    """TLS failed for a reason retrying cannot mend: the registry's certificate is
    not trusted, the registry refused ours (or its absence), or the port is not TLS.
    Raised at the first attempt; the message names the reason and the setting to check.
    """

    description = "Schema Registry TLS handshake failed"


class SchemaRegistryAuthError(SchemaRegistryError):
    """401 or 403: the credentials were refused or lack the permission."""

    description = "Schema Registry refused the credentials"


class SubjectNotFoundError(SchemaRegistryError):
    """40401: the subject has no registered version."""

    description = "Subject not found"


class VersionNotFoundError(SchemaRegistryError):
    """40402: the subject has no such version."""

    description = "Version not found"


class SchemaNotFoundError(SchemaRegistryError):
    """40403: no schema with this id, or this schema is not under the subject."""

    description = "Schema not found"


class IncompatibleSchemaError(SchemaRegistryError):
    """409: the schema breaks the subject's compatibility level."""

    description = "Schema incompatible with an earlier version"


class InvalidSchemaError(SchemaRegistryError):
    """422 (42201 and others): the registry could not parse the schema or the request."""

    description = "Invalid schema"


class SchemaValidationError(SerializationError):
    """A value does not match its schema; the message names the field and the problem."""

    description = "Value does not match its schema"
