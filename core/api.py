"""What every REST API of the apps shares: the JSON parser that refuses what no store can hold,
the request validator, the strict fields, the error shape and the error responses of the schema,
and the base view that maps an oversized body to 413."""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.views import APIView

from core.text import unstorable_text_problem

MAX_JSON_DEPTH = 64


class BadRequest(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "The request is invalid."
    default_code = "invalid"


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource already exists."
    default_code = "conflict"


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is larger than this server accepts."
    default_code = "too_large"


def json_problem(data: Any) -> str | None:
    """Why the store could not hold this parsed JSON, or None if it could: a NUL character or
    a lone surrogate in a key or a string at any depth, or nesting past ``MAX_JSON_DEPTH``."""
    pending = [(data, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            problem = unstorable_text_problem(item)
            if problem:
                return f"{problem} in a JSON string."
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                return f"JSON must not nest more than {MAX_JSON_DEPTH} levels deep."
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return None


class StoreJSONParser(JSONParser):
    """DRF's strict JSON parser (no NaN or Infinity) that also refuses what the store
    cannot hold: NUL characters, lone surrogates and nesting deeper than ``MAX_JSON_DEPTH``."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep."
            ) from None
        problem = json_problem(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


class LargeJSONParser(BaseParser):
    """``StoreJSONParser`` for the routes whose bodies may be larger than
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (an event with its files): up to the setting
    ``limit_setting`` names, a longer body answered 413 saying both sizes.

    DRF reads the body of a ``JSONParser`` through ``HttpRequest.body``, which holds every
    route to the one global limit; a parser of another class is given the request's stream,
    read here up to this route's own limit."""

    media_type = "application/json"
    limit_setting = "DATA_UPLOAD_MAX_MEMORY_SIZE"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = getattr(settings, self.limit_setting)
        request = (parser_context or {}).get("request")
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        except ValueError:
            length = 0
        body = stream.read(limit + 1) if length <= limit else b""
        if length > limit or len(body) > limit:
            raise PayloadTooLarge(
                f"The body is {max(length, len(body))} bytes; this route takes at most {limit} "
                f"bytes ({self.limit_setting})."
            )
        return StoreJSONParser().parse(io.BytesIO(body), media_type, parser_context)


def request_data_validated(serializer_class: type[serializers.Serializer], data: Any) -> Any:
    """``data`` validated, or a 400. Query parameters are validated as plain values: DRF
    would read an empty ``?page_size=`` as left out (HTML form semantics), which the
    schema does not allow."""
    if isinstance(data, QueryDict):
        data = data.dict()
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _json_string_checked(field: serializers.CharField, data: Any) -> None:
    """Refuse what the schema of a string field refuses before DRF reads it: a value that is
    not a JSON string, and one longer than ``maxLength`` as sent (DRF measures it after
    trimming the whitespace around it, and so took what the schema says is too long)."""
    if not isinstance(data, str):
        field.fail("invalid")
    if field.max_length is not None and len(data) > field.max_length:
        field.fail("max_length", max_length=field.max_length)


class StrictCharField(serializers.CharField):
    """A string that must be a JSON string: DRF's CharField would turn ``0`` into ``"0"``,
    which the schema (``type: string``) does not allow; and within ``max_length`` as sent."""

    def to_internal_value(self, data: Any) -> str:
        _json_string_checked(self, data)
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    """A ``RegexField`` that takes JSON strings only (see ``StrictCharField``)."""

    def to_internal_value(self, data: Any) -> str:
        _json_string_checked(self, data)
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean only: DRF's BooleanField also takes ``0``, ``1``, ``"yes"`` and more,
    which the schema (``type: boolean``) does not allow. For bodies, not query strings."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What was wrong, in words a person can act on.")


# What every operation refuses though the types of its schema allow it: the store holds no
# NUL and no lone surrogate, and a deep JSON document costs the parser without any use.
REFUSED_EVERYWHERE = (
    "a string holding a NUL (`\\u0000`) character (in the body or the query string) or a "
    f"lone surrogate; JSON nested more than {MAX_JSON_DEPTH} levels deep"
)


def bad_request(*refused: str) -> OpenApiResponse:
    """The 400 of an operation, naming in the schema what the operation refuses on purpose
    (beyond what the schema's types say), so a client learns it from the schema and not
    from a refusal."""
    return OpenApiResponse(
        OpenApiTypes.OBJECT,
        description='Invalid input, nothing written: `{"detail": message}` or '
        "`{field: [messages]}`, in words a person can act on. Refused: "
        + "; ".join((*refused, REFUSED_EVERYWHERE))
        + ".",
    )


BAD_REQUEST = bad_request()
NOT_SIGNED_IN = OpenApiResponse(ErrorSerializer, description="Not signed in.")
TOO_LARGE = OpenApiResponse(ErrorSerializer, description="The body is over the upload limit.")
UNSUPPORTED = OpenApiResponse(ErrorSerializer, description="The body is not JSON.")


class JSONAPIView(APIView):
    """Base of the apps' API views: JSON bodies through ``StoreJSONParser``, a body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` answered 413."""

    parser_classes = [StoreJSONParser]

    def handle_exception(self, exc):
        if isinstance(exc, RequestDataTooBig):
            exc = PayloadTooLarge()
        return super().handle_exception(exc)
