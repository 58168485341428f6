"""The OpenAPI schema as the app serves it, for schemathesis' fuzz of the APIs."""

from __future__ import annotations

import schemathesis
from django.core.wsgi import get_wsgi_application
from schemathesis.config import SchemathesisConfig

# JSON: the schema in YAML took a second to write and read each time a module loaded it.
SCHEMA_URL = "/api/schema/?format=json"


def served_schema(config: SchemathesisConfig):
    """The served schema, its cases sent to the WSGI application in this process."""
    return schemathesis.openapi.from_wsgi(SCHEMA_URL, get_wsgi_application(), config=config)
