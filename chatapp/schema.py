"""The OpenAPI schema's view, and additions to the schema that hold for every operation."""

from __future__ import annotations

import threading
from typing import Any

from django.core.signals import setting_changed
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

THROTTLED = {
    "description": "Too many requests (`API_THROTTLE_USER_RATE`, `API_THROTTLE_ANON_RATE`); "
    "nothing was done. Try again after `Retry-After` seconds.",
    "headers": {
        "Retry-After": {
            "description": "Seconds to wait before the next request is accepted.",
            "schema": {"type": "integer", "minimum": 0},
        }
    },
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {"detail": {"type": "string"}},
                "required": ["detail"],
            }
        }
    },
}


def responses_add_throttled(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """Document the 429 that the API's throttles may answer on any operation."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            operation.setdefault("responses", {}).setdefault("429", THROTTLED)
    return result


def request_bodies_require_some_field(
    result: dict[str, Any], generator, request, public
) -> dict[str, Any]:
    """A body whose schema needs at least one field (``minProperties``, or a required field of
    a schema given inline, as the uploads' form is) is itself required: drf-spectacular marks
    a body required only when a field of a serializer is."""
    schemas = result.get("components", {}).get("schemas", {})
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody")
            for media in (body or {}).get("content", {}).values():
                schema = media.get("schema", {})
                if "$ref" in schema:
                    schema = schemas.get(schema["$ref"].rsplit("/", 1)[-1], {})
                if schema.get("minProperties") or schema.get("required"):
                    body["required"] = True
    return result


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema view, with the schema made once per process and language,
    under a lock.

    The generator loads its extension classes lazily and is not safe to run twice at once:
    on a fresh process, concurrent first requests answered 500 (an AttributeError inside
    drf-spectacular), 1 to 80 of 100. And the schema does not change while the process runs,
    so making it again for every request only spent the time of an anonymous caller's choice.
    """

    _lock = threading.Lock()
    _made: dict[tuple[str | None, str | None], dict[str, Any]] = {}

    def _get_schema_response(self, request) -> Response:
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language())
        with self._lock:
            schema = self._made.get(key)
            if schema is None:
                generator = self.generator_class(
                    urlconf=self.urlconf, api_version=version, patterns=self.patterns
                )
                schema = self._made[key] = generator.get_schema(
                    request=request, public=self.serve_public
                )
        filename = self._get_filename(request, version)
        return Response(
            data=schema, headers={"Content-Disposition": f'inline; filename="{filename}"'}
        )


def _schemas_forget(**kwargs) -> None:
    """A changed setting (tests change them) may change the schema."""
    SchemaView._made.clear()


setting_changed.connect(_schemas_forget)
