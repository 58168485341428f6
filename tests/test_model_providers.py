"""Every model call goes through a provider of ``core.llm``: only ``core/gemini.py`` imports
google-genai's client and only ``core/openai_compatible.py`` the openai client. The rest of the
product uses ``google.genai.types`` as the data format of events, which calls no model."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("access_app", "agents_app", "chatapp", "core", "memory_app", "sessions_app")
PROVIDERS = {"core/gemini.py", "core/openai_compatible.py"}
CLIENT_IMPORT = re.compile(
    r"^\s*(?:from google import genai|import google\.genai|from google\.genai import (?!types\s*$)"
    r"|from google\.genai\.(?!types\b)|import openai|from openai\b)",
    re.MULTILINE,
)


def test_only_the_providers_import_a_model_client():
    offenders = [
        f"{path.relative_to(ROOT)}: {found.group(0).strip()}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in PROVIDERS
        for found in CLIENT_IMPORT.finditer(path.read_text())
    ]
    assert offenders == []


def test_the_check_finds_a_client_import():
    assert CLIENT_IMPORT.search("from google import genai\n")
    assert CLIENT_IMPORT.search("from google.genai import errors, types\n")
    assert CLIENT_IMPORT.search("import openai\n")
    assert not CLIENT_IMPORT.search("from google.genai import types\n")
