"""The API reference (/api/docs/, from /api/schema/) describes every part of the API, and the
site and the README lead to it."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

OWN_PAGES = {"api/schema/", "api/docs/"}


@pytest.fixture(scope="module")
def schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema: dict):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def api_routes(patterns, prefix: str = "") -> list[str]:
    routes = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            routes += api_routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            routes.append(prefix + str(pattern.pattern))
    return [route for route in routes if route.startswith("api/") and route not in OWN_PAGES]


def test_every_api_route_is_in_the_reference(schema):
    documented = {re.sub(r"\{(\w+)\}", r"<\1>", path) for path in schema["paths"]}
    routes = {
        "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"<\1>", route)
        for route in api_routes(get_resolver().url_patterns)
    }

    assert sorted(routes - documented) == []


def test_every_operation_has_a_declared_tag_a_summary_and_a_description_of_its_own(schema):
    declared = {tag["name"] for tag in schema.get("tags", [])}
    descriptions: dict[str, str] = {}
    for name, operation in operations(schema):
        assert len(operation.get("tags", [])) == 1, name
        assert operation["tags"][0] in declared, f"{name}: tag {operation['tags']} not declared"
        assert operation.get("summary"), name
        description = " ".join(operation.get("description", "").split())
        assert len(description) >= 40, f"{name} has no description"
        assert description != operation["summary"], name
        assert description not in descriptions, (
            f"{name} shares its description with {descriptions.get(description)}"
        )
        descriptions[description] = name


def test_every_tag_is_described_and_used(schema):
    used = {tag for _, operation in operations(schema) for tag in operation["tags"]}

    for tag in schema["tags"]:
        assert len(tag.get("description", "")) >= 40, tag["name"]
    assert {tag["name"] for tag in schema["tags"]} == used


def test_the_overview_names_every_part_and_how_to_sign_in(schema):
    overview = schema["info"]["description"]

    for tag in schema["tags"]:
        assert f"**{tag['name']}**" in overview, tag["name"]
    for subject in ("session cookie", "X-CSRFToken", "HTTP Basic", "404", "429", "Retry-After"):
        assert subject in overview, subject


@pytest.mark.django_db
def test_the_reference_is_linked_from_every_page_of_a_signed_in_user(client, user):
    client.force_login(user)

    for path in ("/", "/memory/", "/settings/", "/access/"):
        assert 'href="/api/docs/"' in client.get(path).content.decode(), path
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.django_db
def test_the_reference_is_not_offered_before_signing_in(client):
    assert 'href="/api/docs/"' not in client.get("/accounts/login/").content.decode()


def test_the_readme_links_the_reference_and_its_overview():
    readme = (settings.BASE_DIR / "README.md").read_text()

    assert "http://127.0.0.1:8000/api/docs/" in readme
    assert "(docs/api.md)" in readme
