"""An in-memory Confluent Schema Registry on aiohttp.web, for tests.

It serves the REST subset the producer side uses, with the registry's status
codes and error bodies (``{"error_code": 40401, "message": ...}``): register,
lookup, schema by id, subject versions (``latest`` too), compatibility checks
and global / per-subject compatibility configuration. Avro compatibility
(BACKWARD, FORWARD, FULL and their TRANSITIVE forms) is decided with Avro's
schema resolution rules by :mod:`.avro_compat`; JSON and other schema types are
always compatible here. Schemas are the same when the registry would take them
as one (:mod:`.registry_canonical`: Avro ``"string"`` is ``{"type": "string"}``,
JSON whitespace does not matter), for registering and for lookups alike.
``fail_next(n)`` makes the next requests fail with a
5xx, ``require_basic_auth``/``require_bearer`` make it refuse others with 401,
and ``requests`` records every request's method, path and headers. Given an
``ssl`` context it serves https (a server context that demands a client
certificate makes it a mutual-TLS registry).

    async with MockSchemaRegistry() as registry:
        client = SchemaRegistryClient(registry.url)
"""

from __future__ import annotations

import base64
import json
import ssl as ssl_module
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from aiohttp.typedefs import Handler

from .avro_compat import avro_compatible
from .registry_canonical import canonical

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["MockSchemaRegistry", "RecordedRequest"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


class _Error(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _not_found_subject(subject: str) -> _Error:
    return _Error(404, 40401, f"Subject '{subject}' not found.")


class MockSchemaRegistry:
    """A registry on a loopback port; ``start()``/``stop()`` or ``async with``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        compatibility: str = "BACKWARD",
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.ssl = ssl
        self.port = 0
        self.compatibility = compatibility
        self.subject_compatibility: dict[str, str] = {}
        # id -> (schemaType, schema, references); ids start at 1 as the registry's do
        self.schemas: dict[int, tuple[str, str, list[Any]]] = {}
        # id -> the schema's canonical key, as registered (normalized if it was)
        self._keys: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}  # subject -> schema id of each version
        self.requests: list[RecordedRequest] = []
        self._failures: list[int] = []
        self._auth: str | None = None
        self._runner: web.AppRunner | None = None

    # -- control ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl is not None else 'http'}://{self.host}:{self.port}"

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (50302-style body)."""
        self._failures.extend([status] * count)

    def require_basic_auth(self, user: str, password: str) -> None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._auth = f"Basic {token}"

    def require_bearer(self, token: str) -> None:
        self._auth = f"Bearer {token}"

    async def start(self) -> Self:
        app = web.Application(middlewares=[self._middleware])
        r = app.router
        r.add_post("/subjects/{subject}/versions", self._register)
        r.add_post("/subjects/{subject}", self._lookup)
        r.add_get("/subjects", self._list_subjects)
        r.add_get("/subjects/{subject}/versions", self._list_versions)
        r.add_get("/subjects/{subject}/versions/{version}", self._get_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self._get_version_schema)
        r.add_get("/schemas/ids/{id}", self._get_by_id)
        r.add_get("/schemas/ids/{id}/versions", self._id_versions)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self._compatibility)
        r.add_get("/config", self._get_global)
        r.add_put("/config", self._put_global)
        r.add_get("/config/{subject}", self._get_config)
        r.add_put("/config/{subject}", self._put_config)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=self.ssl)
        await site.start()
        self.port = self._runner.addresses[0][1]  # (host, port) of the one site's socket
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- plumbing --------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.requests.append(
            RecordedRequest(
                request.method, request.path, dict(request.query), dict(request.headers)
            )
        )
        try:
            if self._failures:
                status = self._failures.pop(0)
                raise _Error(status, status * 100 + 1, "injected failure")
            if self._auth is not None and request.headers.get("Authorization") != self._auth:
                raise _Error(401, 401, "Unauthorized")
            return await handler(request)
        except web.HTTPNotFound:  # a path this mock does not serve: the registry's 404 body
            return self._json({"error_code": 404, "message": "HTTP 404 Not Found"}, 404)
        except _Error as err:
            return self._json({"error_code": err.code, "message": err.message}, err.status)

    @staticmethod
    def _json(body: Any, status: int = 200) -> web.Response:
        return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)

    @staticmethod
    async def _body(request: web.Request) -> tuple[str, str, list[Any]]:
        try:
            body = json.loads(await request.text())
            schema = body["schema"]
        except (ValueError, KeyError, TypeError):
            raise _Error(422, 42201, "Invalid schema: the body has no 'schema'") from None
        kind = body.get("schemaType") or "AVRO"
        if kind not in ("AVRO", "JSON", "PROTOBUF"):
            raise _Error(422, 42201, f"Invalid schema type {kind}")
        if kind in ("AVRO", "JSON"):
            try:
                parsed = json.loads(schema)
                if kind == "AVRO":
                    import fastavro

                    fastavro.parse_schema(parsed)
            except Exception as exc:  # noqa: BLE001 - any parse failure is a 42201
                raise _Error(422, 42201, f"Invalid schema {schema}: {exc}") from None
        return kind, schema, list(body.get("references") or [])

    @staticmethod
    def _key(request: web.Request, kind: str, schema: str) -> str:
        """The schema's canonical key, ``normalize=true`` as the request asks."""
        try:
            return canonical(kind, schema, normalize=request.query.get("normalize") == "true")
        except (ValueError, TypeError) as exc:
            raise _Error(422, 42201, f"Invalid schema {schema}: {exc}") from None

    def _find(self, kind: str, key: str, refs: list[Any]) -> int | None:
        """The id of the schema registered as the same schema (same type, form and references)."""
        for sid, (stored_kind, stored, stored_refs) in self.schemas.items():
            if stored_kind != kind or stored_refs != refs:
                continue
            stored_key = self._keys.get(sid)
            if stored_key is None:  # put into ``schemas`` directly (by a test): as written
                stored_key = self._keys[sid] = canonical(kind, stored)
            if stored_key == key:
                return sid
        return None

    def _versions(self, subject: str) -> list[int]:
        versions = self.subjects.get(subject)
        if not versions:
            raise _not_found_subject(subject)
        return versions

    def _version_index(self, subject: str, version: str) -> int:
        versions = self._versions(subject)
        if version in ("latest", "-1"):
            return len(versions)
        try:
            number = int(version)
        except ValueError:
            raise _Error(422, 42202, f"The specified version '{version}' is not valid") from None
        if not 1 <= number <= len(versions):
            raise _Error(404, 40402, f"Version {number} not found.")
        return number

    def _version_body(self, subject: str, number: int) -> dict[str, Any]:
        sid = self.subjects[subject][number - 1]
        kind, schema, refs = self.schemas[sid]
        out: dict[str, Any] = {"subject": subject, "version": number, "id": sid, "schema": schema}
        if kind != "AVRO":
            out["schemaType"] = kind
        if refs:
            out["references"] = refs
        return out

    def level(self, subject: str) -> str:
        return self.subject_compatibility.get(subject, self.compatibility)

    def _compatible(self, subject: str, kind: str, schema: str, against: list[int]) -> bool:
        level = self.level(subject)
        if level == "NONE" or not against:
            return True
        if any(self.schemas[sid][0] != kind for sid in against):
            return False  # the registry refuses a change of schema type under a level
        if kind != "AVRO":
            return True  # only Avro's resolution rules are checked here
        if not level.endswith("_TRANSITIVE"):
            against = against[-1:]
        for sid in against:
            old = self.schemas[sid][1]
            backward = level.startswith(("BACKWARD", "FULL"))
            forward = level.startswith(("FORWARD", "FULL"))
            if backward and not avro_compatible(reader=schema, writer=old):
                return False
            if forward and not avro_compatible(reader=old, writer=schema):
                return False
        return True

    # -- handlers --------------------------------------------------------------

    async def _register(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        kind, schema, refs = await self._body(request)
        key = self._key(request, kind, schema)
        sid = self._find(kind, key, refs)
        versions = self.subjects.setdefault(subject, [])
        if sid is not None and sid in versions:
            return self._json({"id": sid})
        if not self._compatible(subject, kind, schema, versions):
            raise _Error(
                409,
                409,
                "Schema being registered is incompatible with an earlier schema for "
                f'subject "{subject}"',
            )
        if sid is None:
            sid = max(self.schemas, default=0) + 1
            self.schemas[sid] = (kind, schema, refs)
            self._keys[sid] = key
        versions.append(sid)
        return self._json({"id": sid})

    async def _lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        kind, schema, refs = await self._body(request)
        versions = self._versions(subject)
        sid = self._find(kind, self._key(request, kind, schema), refs)
        if sid is None or sid not in versions:
            raise _Error(404, 40403, "Schema not found")
        return self._json(self._version_body(subject, versions.index(sid) + 1))

    async def _list_subjects(self, request: web.Request) -> web.Response:
        return self._json(sorted(s for s, v in self.subjects.items() if v))

    async def _list_versions(self, request: web.Request) -> web.Response:
        versions = self._versions(request.match_info["subject"])
        return self._json(list(range(1, len(versions) + 1)))

    async def _get_version(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        number = self._version_index(subject, request.match_info["version"])
        return self._json(self._version_body(subject, number))

    async def _get_version_schema(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        number = self._version_index(subject, request.match_info["version"])
        return web.Response(
            text=self._version_body(subject, number)["schema"], content_type=CONTENT_TYPE
        )

    def _schema_of(self, request: web.Request) -> tuple[int, tuple[str, str, list[Any]]]:
        try:
            sid = int(request.match_info["id"])
            return sid, self.schemas[sid]
        except (ValueError, KeyError):
            raise _Error(404, 40403, "Schema not found") from None

    async def _get_by_id(self, request: web.Request) -> web.Response:
        _, (kind, schema, refs) = self._schema_of(request)
        out: dict[str, Any] = {"schema": schema}
        if kind != "AVRO":
            out["schemaType"] = kind
        if refs:
            out["references"] = refs
        return self._json(out)

    async def _id_versions(self, request: web.Request) -> web.Response:
        sid, _ = self._schema_of(request)
        return self._json(
            [
                {"subject": s, "version": i + 1}
                for s, ids in sorted(self.subjects.items())
                for i, x in enumerate(ids)
                if x == sid
            ]
        )

    async def _compatibility(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        number = self._version_index(subject, request.match_info["version"])
        kind, schema, _ = await self._body(request)
        versions = self.subjects[subject]
        against = (
            versions if self.level(subject).endswith("_TRANSITIVE") else [versions[number - 1]]
        )
        ok = self._compatible(subject, kind, schema, against)
        return self._json({"is_compatible": ok})

    async def _level_from(self, request: web.Request) -> str:
        try:
            level = str(json.loads(await request.text())["compatibility"]).upper()
        except (ValueError, KeyError, TypeError):
            level = ""
        if level not in LEVELS:
            raise _Error(422, 42203, "Invalid compatibility level")
        return level

    async def _get_global(self, request: web.Request) -> web.Response:
        return self._json({"compatibilityLevel": self.compatibility})

    async def _put_global(self, request: web.Request) -> web.Response:
        self.compatibility = await self._level_from(request)
        return self._json({"compatibility": self.compatibility})

    async def _get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        level = self.subject_compatibility.get(subject)
        if level is None:
            if request.query.get("defaultToGlobal") != "true":
                raise _Error(
                    404,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            level = self.compatibility
        return self._json({"compatibilityLevel": level})

    async def _put_config(self, request: web.Request) -> web.Response:
        level = await self._level_from(request)
        self.subject_compatibility[request.match_info["subject"]] = level
        return self._json({"compatibility": level})
