"""JSON values in Confluent's wire format, checked against a JSON Schema (extra ``jsonschema``).

The payload is the value as compact UTF-8 JSON. Validation with the
``jsonschema`` package is on by default (Confluent's serializers validate
too); ``validate=False`` turns it off for trusted input. Values are first
checked by a compiled check of the schema (:mod:`.json_check`), a few
microseconds; only those it does not pass, or every value when the schema uses
keywords it does not compile, go through ``jsonschema``. A value that fails
raises SchemaValidationError naming the path of the field and the problem.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import ConfigurationError
from .errors import SchemaValidationError
from .json_check import compile_check
from .serializer import SchemaSerializer

__all__ = ["JsonSchemaSerializer"]


class JsonSchemaSerializer(SchemaSerializer):
    """Serialize JSON-compatible objects with a JSON Schema.

    ``JsonSchemaSerializer(client, schema_str, validate=True, to_dict=None, ...)``;
    RecordNameStrategy takes the schema's ``title`` as the record name, as
    Confluent's serializers do.
    """

    schema_type: ClassVar[str] = "JSON"

    def __init__(
        self,
        client: Any,
        schema_str: str | None = None,
        *,
        validate: bool = True,
        to_dict: Callable[[Any], Any] | None = None,
        **options: Any,
    ) -> None:
        self._validate = validate
        self._to_dict = to_dict
        super().__init__(client, schema_str, **options)

    def _parse(self, schema_str: str) -> Any:
        try:
            schema = json.loads(schema_str)
        except ValueError as exc:
            raise ConfigurationError(f"invalid JSON Schema (not JSON): {exc}") from exc
        if not isinstance(schema, (dict, bool)):
            raise ConfigurationError("invalid JSON Schema: not an object or boolean")
        if not self._validate:
            return (schema, None, None)
        try:
            import jsonschema
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ConfigurationError(
                "JsonSchemaSerializer validates with jsonschema: pip install "
                "'aioproducer[jsonschema]', or pass validate=False"
            ) from exc
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(f"invalid JSON Schema: {exc.message}") from exc
        # Values pass the compiled check in a few microseconds; jsonschema itself
        # sees those that fail it (and explains them) or all, if it cannot be compiled.
        return (schema, cls(schema), compile_check(schema, cls))

    def _record_name(self, parsed: Any) -> str | None:
        schema = parsed[0]
        return schema.get("title") if isinstance(schema, dict) else None

    def _encoder(self, parsed: Any) -> Callable[[Any], bytes]:
        _, validator, check = parsed
        to_dict = self._to_dict
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

        def encode(obj: Any) -> bytes:
            if to_dict is not None:
                obj = to_dict(obj)
            if validator is not None and (check is None or not check(obj)):
                error = next(iter(validator.iter_errors(obj)), None)
                if error is not None:
                    raise SchemaValidationError(_explain(validator, obj, error))
            try:
                return dumps(obj).encode("utf-8")
            except (TypeError, ValueError) as exc:
                raise SchemaValidationError(f"value is not JSON-serializable: {exc}") from exc

        return encode


def _explain(validator: Any, obj: Any, first: Any) -> str:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(obj)) or first
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"value does not match its schema (JSON Schema) at {where!r}: {error.message}"
