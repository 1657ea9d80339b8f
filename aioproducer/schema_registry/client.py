"""An asyncio client of Confluent Schema Registry's REST API, on aiohttp.

One aiohttp session per client, created on first use and closed by
:meth:`SchemaRegistryClient.close` (or ``async with``). Every request is
bounded: a total timeout per attempt, and at most ``max_retries`` retries with
exponential backoff on 5xx answers and connection errors (as Confluent's
clients do with ``max.retries``/``retries.wait.ms``). Answers are cached: the
id of a (subject, schema) pair and the schema of an id never change in a
registry, so they are kept (up to ``cache_capacity`` entries); the latest
version of a subject may change and is kept for ``latest_ttl_s``.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import logging
import random
import re
import ssl as ssl_module
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from ..errors import ConfigurationError
from . import errors

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["RegisteredSchema", "Schema", "SchemaReference", "SchemaRegistryClient"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# Statuses that mean "try again": the registry is starting, overloaded or
# forwarding to a leader that moved.
RETRIABLE = frozenset({500, 502, 503, 504})
COMPATIBILITY_LEVELS = frozenset(
    {
        "NONE",
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
    }
)


@dataclass(frozen=True)
class SchemaReference:
    """A schema another one imports: its import name, and where it is registered."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    """A schema as the registry stores it: text, type (AVRO, JSON, PROTOBUF), references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default=())

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":  # the registry's default; Confluent omits it too
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [
                {"name": r.name, "subject": r.subject, "version": r.version}
                for r in self.references
            ]
        return out

    @classmethod
    def from_response(cls, body: Mapping[str, Any]) -> Schema:
        refs = tuple(
            SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in body.get("references") or ()
        )
        return cls(body["schema"], body.get("schemaType") or "AVRO", refs)


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema under a subject: its global id and the subject's version number."""

    schema_id: int
    schema: Schema
    subject: str
    version: int


def _strip_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without ``user:pass@`` (kept out of messages), and that user info."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"Schema Registry URL must be http(s)://host[:port], got {parts.scheme or '?'}://..."
        )
    if parts.username is None:
        return url.rstrip("/"), None
    netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")
    return clean, (unquote(parts.username), unquote(parts.password or ""))


def _import_aiohttp() -> Any:
    try:
        import aiohttp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            "the Schema Registry client needs aiohttp: pip install 'aioproducer[avro]'"
        ) from exc
    return aiohttp


_FINAL_ALERTS = (
    "CERTIFICATE",
    "UNKNOWN_CA",
    "HANDSHAKE_FAILURE",
    "ACCESS_DENIED",
    "PROTOCOL_VERSION",
)
_SSL_REASON = re.compile(r"\[SSL: ([A-Z0-9_]+)\]")


def _ssl_reason(exc: BaseException) -> tuple[str, str] | None:
    """``(reason, detail)`` of the TLS failure behind ``exc``, if it is one.

    aiohttp wraps ssl's errors (``certificate_error``/``os_error``, or a copy of
    their arguments in a ClientOSError), so the chain and the text are searched.
    """
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        for candidate in (
            getattr(seen, "certificate_error", None),
            getattr(seen, "os_error", None),
            seen,
        ):
            if isinstance(candidate, ssl_module.SSLCertVerificationError):
                detail = getattr(candidate, "verify_message", None) or candidate
                return "CERTIFICATE_VERIFY_FAILED", str(detail)
            if isinstance(candidate, ssl_module.SSLError) and candidate.reason:
                return str(candidate.reason), str(candidate.reason)
        found = _SSL_REASON.search(str(seen))
        if found:
            return found.group(1), found.group(1)
        seen = seen.__cause__ or seen.__context__
    return None


def _describe(exc: BaseException, url: str, timeout_s: float) -> tuple[str, bool]:
    """What went wrong with one attempt, in words, and whether it is final.

    Messages carry the exception's text: the URLs requested are free of
    credentials (user info is taken out of them), which go in headers.
    """
    tls = _ssl_reason(exc)
    if tls is not None:
        reason, detail = tls
        if reason == "CERTIFICATE_VERIFY_FAILED":
            what = (
                f"TLS: the registry's certificate is not trusted ({detail}); check ssl.ca.location"
            )
            return what, True
        if "ALERT" in reason:
            what = (
                f"TLS: the registry refused the handshake ({reason}); it may require a client "
                "certificate (ssl.certificate.location, ssl.key.location) or not trust the one given"
            )
            # Alerts about certificates and versions stay true on a retry; others
            # (an internal error, say) may not.
            return what, any(word in reason for word in _FINAL_ALERTS)
        if reason == "WRONG_VERSION_NUMBER":
            return "TLS: the server does not speak TLS on this port (an http:// URL?)", True
        return f"TLS error {reason}", False
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within request timeout {timeout_s:g} s", False
    name = type(exc).__name__
    dropped = name == "ServerDisconnectedError" or any(
        isinstance(e, (ConnectionResetError, BrokenPipeError))
        or getattr(e, "errno", None) in (errno.ECONNRESET, errno.EPIPE)
        for e in (exc, getattr(exc, "os_error", None), exc.__cause__)
    )
    if dropped and url.startswith("https:"):
        # Under TLS 1.3 a server checks the client's certificate after the
        # handshake; its refusal often arrives as a bare disconnect or reset.
        what = (
            "the server closed the connection without an answer (over https, a registry that "
            "requires a client certificate does so when none, or an untrusted one, is given: "
            "ssl.certificate.location, ssl.key.location)"
        )
        return what, False
    text = str(exc)[:300]
    return (f"{name}: {text}" if text else name), False


_K = TypeVar("_K")
_V = TypeVar("_V")


class _Cache(OrderedDict[_K, _V]):
    """A size-bounded mapping that drops its oldest entry."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def put(self, key: _K, value: _V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.capacity:
            self.popitem(last=False)


class SchemaRegistryClient:
    """An async Schema Registry client; see the module docstring.

    Args:
        url: base URL, or several (tried in turn on connection errors); user
            info in a URL (``https://user:pass@host``) is used as basic auth.
        basic_auth: ``(user, password)`` for HTTP basic authentication.
        bearer_token: a static OAuth bearer token (not together with basic_auth).
        bearer_logical_cluster: Confluent Cloud's ``target-sr-cluster`` header.
        bearer_identity_pool: Confluent Cloud's ``Confluent-Identity-Pool-Id`` header.
        ssl: an SSL context for https (a CA, and a client certificate for mTLS).
        timeout_s: bound on each attempt (connect and answer).
        max_retries: retries after the first attempt on 5xx and connection errors.
        retry_backoff_s: the first wait before a retry, doubled per retry.
        retry_backoff_max_s: the cap on that wait.
        latest_ttl_s: how long the latest version of a subject is cached.
        cache_capacity: entries kept per cache.
        max_in_flight: requests sent at once; more wait their turn (so that
            resolving many subjects at once neither floods the registry nor
            holds the event loop up starting hundreds of requests in one step).
    """

    def __init__(
        self,
        url: str | list[str],
        *,
        basic_auth: tuple[str, str] | None = None,
        bearer_token: str | None = None,
        bearer_logical_cluster: str | None = None,
        bearer_identity_pool: str | None = None,
        ssl: ssl_module.SSLContext | None = None,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        retry_backoff_s: float = 0.1,
        retry_backoff_max_s: float = 2.0,
        latest_ttl_s: float = 60.0,
        cache_capacity: int = 1000,
        max_in_flight: int = 8,
    ) -> None:
        urls = [url] if isinstance(url, str) else list(url)
        if not urls:
            raise ConfigurationError("Schema Registry URL is missing")
        self._urls: list[str] = []
        for u in urls:
            clean, userinfo = _strip_userinfo(u.strip())
            self._urls.append(clean)
            if userinfo is not None and basic_auth is None:
                basic_auth = userinfo
        if basic_auth is not None and bearer_token is not None:
            raise ConfigurationError("Schema Registry: basic auth and a bearer token both given")
        if (
            timeout_s <= 0
            or max_retries < 0
            or retry_backoff_s < 0
            or cache_capacity < 1
            or max_in_flight < 1
        ):
            raise ConfigurationError(
                "Schema Registry: timeout_s must be > 0, max_retries and retry_backoff_s >= 0, "
                "cache_capacity and max_in_flight >= 1"
            )
        # Imported now, not at the first request: importing aiohttp takes a
        # hundred milliseconds or more, which must not stall a running loop.
        self._aiohttp = _import_aiohttp()
        self._headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        if basic_auth is not None:
            token = base64.b64encode(f"{basic_auth[0]}:{basic_auth[1]}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        elif bearer_token is not None:
            self._headers["Authorization"] = f"Bearer {bearer_token}"
            if bearer_logical_cluster:
                self._headers["target-sr-cluster"] = bearer_logical_cluster
            if bearer_identity_pool:
                self._headers["Confluent-Identity-Pool-Id"] = bearer_identity_pool
        self._ssl = ssl
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff = retry_backoff_s
        self._backoff_max = max(retry_backoff_max_s, retry_backoff_s)
        self._latest_ttl = latest_ttl_s
        self._session: Any = None  # aiohttp.ClientSession, made on first use
        self._max_in_flight = max_in_flight
        self._slots: asyncio.Semaphore | None = None  # made with the session, on its loop
        self._ids: _Cache[tuple[str, Schema, bool], int] = _Cache(cache_capacity)
        self._schemas: _Cache[int, Schema] = _Cache(cache_capacity)
        # subject -> (when it expires, the latest version)
        self._latest: _Cache[str, tuple[float, RegisteredSchema]] = _Cache(cache_capacity)
        self._versions: _Cache[tuple[str, int], RegisteredSchema] = _Cache(cache_capacity)

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> SchemaRegistryClient:
        """A client from Confluent's property names (see :mod:`.config`)."""
        from .config import client_kwargs

        return cls(**client_kwargs(conf))

    @property
    def url(self) -> str:
        """The first base URL, without credentials."""
        return self._urls[0]

    @property
    def max_request_s(self) -> float:
        """The longest one request may take: every attempt timing out, and the backoffs between."""
        attempts = self._max_retries + 1
        return attempts * self._timeout_s + self._max_retries * self._backoff_max * 1.2

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP session; the client may be used again (a new session is made)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _get_session(self) -> Any:
        if self._session is None or self._session.closed:
            aiohttp = self._aiohttp
            self._slots = asyncio.Semaphore(self._max_in_flight)
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout_s),
                connector=aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True),
            )
        return self._session

    # -- the HTTP exchange -----------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        *,
        subject: str | None = None,
    ) -> Any:
        """One REST call with bounded retries; the decoded JSON answer or a typed error.

        ``path`` may hold ``{subject}``: it is sent percent-encoded, while messages
        show the template and name the subject as the caller wrote it (a path such
        as ``/subjects/Shop%20Order%20Event%20v2`` is not what the user typed).
        """
        aiohttp = self._aiohttp
        label = f"{method} {path}"
        if subject is not None:
            label = f"{label} for subject {subject!r}"
            path = path.replace("{subject}", quote(subject, safe=""))
        session = self._get_session()
        slots = self._slots
        assert slots is not None
        data: str | None = None
        attempt, last = 0, ""
        while True:
            url = self._urls[attempt % len(self._urls)]
            try:
                async with slots:
                    if data is None and body is not None:  # once a slot is ours: no work queued
                        data = json.dumps(body)
                    async with session.request(
                        method, url + path, data=data, params=params, headers=self._headers
                    ) as resp:
                        text = await resp.text()
                        status = resp.status
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                what, fatal = _describe(exc, url, self._timeout_s)
                if fatal:  # a refused certificate stays refused: retrying cannot help
                    raise errors.SchemaRegistryTLSError(
                        f"Schema Registry {label} at {url}: {what}"
                    ) from exc
                last = f"{what}, from {url}"
            else:
                if status < 300:
                    return json.loads(text) if text else None
                if status not in RETRIABLE:
                    raise self._error(label, url, status, text)
                last = f"HTTP {status} from {url}"
            if attempt >= self._max_retries:
                raise errors.SchemaRegistryUnavailableError(
                    f"Schema Registry {label} failed after {attempt + 1} attempt(s): {last}"
                )
            delay = min(self._backoff * (2**attempt), self._backoff_max)
            log.debug("Schema Registry %s: %s; retrying in %.3fs", label, last, delay)
            attempt += 1
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))

    @staticmethod
    def _error(label: str, url: str, status: int, text: str) -> errors.SchemaRegistryError:
        try:
            body = json.loads(text)
            code = int(body.get("error_code", status))
            message = str(body.get("message", ""))[:500]
        except (ValueError, TypeError, AttributeError):
            code, message = status, text[:200]
        what = f"Schema Registry {label} at {url}: HTTP {status}, error {code}: {message}"
        cls: type[errors.SchemaRegistryError] = errors.SchemaRegistryError
        if status in (401, 403):
            cls = errors.SchemaRegistryAuthError
        elif code == 40401:
            cls = errors.SubjectNotFoundError
        elif code == 40402:
            cls = errors.VersionNotFoundError
        elif code == 40403:
            cls = errors.SchemaNotFoundError
        elif status == 409 or code == 409:
            cls = errors.IncompatibleSchemaError
        elif status == 422:
            cls = errors.InvalidSchemaError
        return cls(what, status=status, error_code=code)

    # -- the REST API ----------------------------------------------------------

    async def register_schema(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> int:
        """Register ``schema`` under ``subject`` (or find it there); its global id."""
        key = (subject, schema, normalize)
        cached = self._ids.get(key)
        if cached is not None:
            return int(cached)
        answer = await self._request(
            "POST",
            "/subjects/{subject}/versions",
            schema.body(),
            {"normalize": "true" if normalize else "false"},
            subject=subject,
        )
        schema_id = int(answer["id"])
        self._ids.put(key, schema_id)
        self._schemas.setdefault(schema_id, schema)
        return schema_id

    async def lookup_schema(
        self, subject: str, schema: Schema, *, normalize: bool = False
    ) -> RegisteredSchema:
        """The version of ``subject`` holding ``schema`` (SchemaNotFoundError if none)."""
        answer = await self._request(
            "POST",
            "/subjects/{subject}",
            schema.body(),
            {"normalize": "true" if normalize else "false"},
            subject=subject,
        )
        found = self._registered(answer, subject)
        self._ids.put((subject, schema, normalize), found.schema_id)
        return found

    async def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id (SchemaNotFoundError if none)."""
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        answer = await self._request("GET", f"/schemas/ids/{int(schema_id)}")
        schema = Schema.from_response(answer)
        self._schemas.put(schema_id, schema)
        return schema

    async def get_version(self, subject: str, version: int | str) -> RegisteredSchema:
        """A version of ``subject``; ``"latest"`` (or -1) is :meth:`get_latest_version`."""
        if version in ("latest", -1):
            return await self.get_latest_version(subject)
        cached = self._versions.get((subject, int(version)))
        if cached is not None:
            return cached
        answer = await self._request(
            "GET", f"/subjects/{{subject}}/versions/{int(version)}", subject=subject
        )
        found = self._registered(answer, subject)
        self._versions.put((subject, found.version), found)
        return found

    async def get_latest_version(self, subject: str) -> RegisteredSchema:
        """The latest version of ``subject``, cached for ``latest_ttl_s``."""
        cached = self._latest.get(subject)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        answer = await self._request("GET", "/subjects/{subject}/versions/latest", subject=subject)
        found = self._registered(answer, subject)
        self._latest.put(subject, (now + self._latest_ttl, found))
        self._versions.put((subject, found.version), found)
        return found

    async def test_compatibility(
        self, subject: str, schema: Schema, version: int | str = "latest"
    ) -> bool:
        """Whether ``schema`` may be registered under ``subject`` (its compatibility level)."""
        answer = await self._request(
            "POST",
            f"/compatibility/subjects/{{subject}}/versions/{version}",
            schema.body(),
            subject=subject,
        )
        return bool(answer.get("is_compatible"))

    async def get_compatibility(self, subject: str | None = None) -> str:
        """The compatibility level of ``subject`` (the global one when unset or None)."""
        if subject is None:
            answer = await self._request("GET", "/config")
        else:
            answer = await self._request(
                "GET", "/config/{subject}", params={"defaultToGlobal": "true"}, subject=subject
            )
        return str(answer.get("compatibilityLevel") or answer.get("compatibility"))

    async def set_compatibility(self, level: str, subject: str | None = None) -> str:
        """Set the compatibility level of ``subject`` (or the global one); the level set."""
        level = level.upper()
        if level not in COMPATIBILITY_LEVELS:
            raise ConfigurationError(
                f"compatibility level {level!r} is not one of {sorted(COMPATIBILITY_LEVELS)}"
            )
        path = "/config" if subject is None else "/config/{subject}"
        answer = await self._request("PUT", path, {"compatibility": level}, subject=subject)
        return str(answer.get("compatibility") or answer.get("compatibilityLevel"))

    def _registered(self, answer: Mapping[str, Any], subject: str) -> RegisteredSchema:
        schema = Schema.from_response(answer)
        schema_id = int(answer["id"])
        self._schemas.setdefault(schema_id, schema)
        return RegisteredSchema(
            schema_id, schema, str(answer.get("subject", subject)), int(answer["version"])
        )
