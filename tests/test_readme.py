"""The README leads: what the project is, a screenshot, the two Quickstart commands, running
on a model of one's own, and where to read next, in at most 250 lines; the rest is in docs/
(tests/test_docs.py)."""

import re

import yaml
from django.conf import settings

README = (settings.BASE_DIR / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_readme_is_short():
    assert len(README.splitlines()) <= 250


def test_quickstart_has_the_two_commands_and_the_makefile_has_them():
    quickstart = section("Quickstart")
    commands = re.search(r"```sh\n(.*?)```", quickstart, re.DOTALL).group(1).split("\n")
    makefile = (settings.BASE_DIR / "Makefile").read_text()

    assert [command for command in commands if command] == ["make run", "make test"]
    assert re.search(r"^run:", makefile, re.MULTILINE)
    assert re.search(r"^test:", makefile, re.MULTILINE)
    assert "http://127.0.0.1:8000/" in quickstart
    assert "make run DEBUG=true" in quickstart


def test_the_readme_shows_a_screenshot_that_exists():
    shown = re.findall(r"!\[[^\]]+\]\((docs/[\w-]+\.png)\)", README)

    assert shown
    assert all((settings.BASE_DIR / path).is_file() for path in shown)


def test_every_file_the_readme_links_or_shows_exists():
    targets = re.findall(r"\]\(((?!https?://|#|mailto:)[^)\s]+)\)", README)
    missing = [
        target for target in targets if not (settings.BASE_DIR / target.split("#")[0]).exists()
    ]

    assert targets, "no relative links found: the pattern no longer matches"
    assert missing == [], "the README links to files the repository does not have"


def test_what_to_read_next_leads_to_pages_of_the_site():
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", section("What to read next")))
    config = yaml.safe_load((settings.BASE_DIR / "mkdocs.yml").read_text())
    in_nav = set(re.findall(r"[\w-]+\.md", str(config["nav"])))

    assert {"index.md", "getting-started.md", "concepts.md", "configuration.md"} <= linked
    assert linked <= in_nav, "the README links a page that is not in the site's navigation"


def test_a_model_of_your_own_runs_ollama_with_settings_the_app_reads():
    local = section("A model of your own")
    named = set(re.findall(r"\b([A-Z][A-Z_]+)=", local))

    assert "ollama pull llama3.2" in local and "ollama pull nomic-embed-text" in local
    assert {"LLM_PROVIDER", "OPENAI_BASE_URL", "LLM_MODEL", "MEMORY_EMBEDDER"} <= named
    assert [name for name in named if not hasattr(settings, name)] == []
    assert "(docs/local-models.md)" in local
