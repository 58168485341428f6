"""Additions to the generated OpenAPI schema that hold for every operation."""

from __future__ import annotations

from typing import Any

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
