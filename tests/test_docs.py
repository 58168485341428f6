"""The documentation site (mkdocs.yml, docs/) builds strictly, every page is in its navigation,
and its configuration table is made from chatapp/settings.py, so it cannot drift."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import yaml
from django.conf import settings

ROOT = settings.BASE_DIR
DOCS = ROOT / "docs"


def hook_module():
    spec = importlib.util.spec_from_file_location(
        "docs_configuration_hook", DOCS / "hooks" / "configuration.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


configuration = hook_module()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as `make docs` builds it, into a folder of this test run."""
    site_dir = tmp_path_factory.mktemp("site")
    completed = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return completed, site_dir


def page(text_of: str) -> str:
    return (DOCS / text_of).read_text()


def test_the_site_builds_in_strict_mode_without_a_warning(site):
    completed, site_dir = site

    assert completed.returncode == 0, completed.stderr
    assert not re.search(r"^(WARNING|ERROR)\b", completed.stderr, re.MULTILINE), completed.stderr
    assert (site_dir / "index.html").is_file()


def test_every_page_of_docs_is_in_the_navigation_once():
    nav = str(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    listed = re.findall(r"[\w-]+\.md", nav)
    pages = sorted(path.name for path in DOCS.glob("*.md"))

    assert sorted(listed) == pages


def test_the_configuration_table_lists_every_variable_settings_reads():
    settings_source = (ROOT / "chatapp" / "settings.py").read_text()
    read = re.findall(r'env\.\w+\(\s*"([A-Z0-9_]+)"', settings_source)
    rows = configuration.settings_rows()

    assert read, "no variables found: the pattern no longer matches settings.py"
    assert [name for name, _, _ in rows] == read


def test_the_built_configuration_page_shows_every_variable_with_its_default(site):
    _, site_dir = site
    built = (site_dir / "configuration.html").read_text()

    for name, _, _ in configuration.settings_rows():
        assert f"<td><code>{name}</code></td>" in built, name
    assert "<td><code>DEBUG</code></td>\n<td><code>false</code></td>" in built
    assert configuration.MARKER not in built


def test_a_constant_default_comes_from_settings_and_a_computed_one_from_its_description():
    rows = {name: default for name, default, _ in configuration.settings_rows()}

    assert rows["DATABASE_POOL_MAX_SIZE"] == f"`{settings.DATABASE_POOL_MAX_SIZE}`"
    assert rows["SESSION_IDLE_TTL_SECONDS"] == "`2592000`"
    assert rows["ALLOWED_HOSTS"] == "`localhost,127.0.0.1,[::1],testserver`"
    assert rows["REDIS_URL"] == "empty"
    assert rows["SECURE_SSL_REDIRECT"] == "`true` with `PRODUCTION`, else `false`"


@pytest.mark.parametrize(
    ("settings_py", "described", "problem"),
    [
        ('X = env.int("NEW_LIMIT", default=5)\n', {}, "NEW_LIMIT: read by settings.py"),
        ("", {"GONE": {"description": "Old."}}, "GONE: described, but settings.py does not"),
        (
            'X = env.int("LIMIT", default=5)\n',
            {"LIMIT": {"default": "`6`", "description": "A limit."}},
            "LIMIT: settings.py's default is `5`",
        ),
        (
            'A = 1\nX = env.int("LIMIT", default=A + 1)\n',
            {"LIMIT": {"description": "A limit."}},
            "LIMIT: settings.py computes the default (A + 1)",
        ),
    ],
)
def test_the_table_is_refused_when_its_descriptions_drift_from_settings(
    tmp_path, settings_py, described, problem
):
    (tmp_path / "settings.py").write_text(settings_py)
    (tmp_path / "configuration.yml").write_text(yaml.safe_dump(described))

    with pytest.raises(ValueError, match=re.escape(problem)):
        configuration.settings_rows(tmp_path / "settings.py", tmp_path / "configuration.yml")


def test_getting_started_has_the_commands_and_the_development_switch():
    getting_started = page("getting-started.md")

    assert "```sh\nmake run\nmake test\n```" in getting_started
    assert "make run DEBUG=true" in getting_started
    assert "http://127.0.0.1:8000/" in getting_started
    assert "make docs" in getting_started


def test_the_staff_console_page_says_how_to_make_a_staff_account_with_each_role():
    console = " ".join(page("staff-console.md").split())
    makefile = (ROOT / "Makefile").read_text()

    assert "make staff-user STAFF=" in console
    assert "ROLE=admin" in console
    assert "staff_user_create" in console
    assert "**Memory reviewers**" in console
    assert "**Memory admins**" in console
    assert "**Key managers**" in console
    assert "ROLE=keys" in console
    assert re.search(r"^staff-user:", makefile, re.MULTILINE)


def test_the_chat_page_shows_the_features_and_says_how_to_take_the_screenshots():
    chat = page("chat.md")
    shown = re.findall(r"!\[[^\]]+\]\(([\w-]+\.png)\)", chat)
    script = "tests.browser.feature_screenshots"

    for name in ("attachments", "edit", "search", "phone"):
        assert f"chat-{name}.png" in shown
        assert (DOCS / f"chat-{name}.png").stat().st_size < 300_000
    assert f"python -m {script}" in chat
    assert (ROOT / "tests" / "browser" / "feature_screenshots.py").exists()


def test_the_pages_say_nothing_is_still_to_come_for_pages_that_exist():
    assert all("come with a later step" not in path.read_text() for path in DOCS.glob("*.md"))
    assert "/memory/" in page("memory.md")


def test_the_make_target_builds_the_site_under_build():
    makefile = (ROOT / "Makefile").read_text()
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    assert re.search(r"^docs: install\n\t.*mkdocs build --strict", makefile, re.MULTILINE)
    assert config["site_dir"].startswith("build/")
    assert "--extra dev --extra docs -o requirements/dev.txt" in makefile  # what install installs
