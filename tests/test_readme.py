"""The README tells the truth about the settings and the two Quickstart commands."""

import re

from django.conf import settings

README = (settings.BASE_DIR / "README.md").read_text()


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def test_the_configuration_table_lists_every_variable_settings_reads():
    settings_source = (settings.BASE_DIR / "chatapp" / "settings.py").read_text()
    read = set(re.findall(r'env\.\w+\(\s*"([A-Z0-9_]+)"', settings_source))
    table_rows = [line for line in section("Configuration").splitlines() if line.startswith("| `")]
    documented = {
        name for row in table_rows for name in re.findall(r"`([A-Z0-9_]+)`", row.split("|")[1])
    }

    assert read, "no variables found: the pattern no longer matches settings.py"
    assert sorted(read - documented) == [], "read by settings.py but missing from the README"
    assert sorted(documented - read) == [], "in the README but not read by settings.py"


def test_quickstart_has_the_two_commands_and_the_makefile_has_them():
    quickstart = section("Quickstart")
    commands = re.search(r"```sh\n(.*?)```", quickstart, re.DOTALL).group(1).split("\n")
    makefile = (settings.BASE_DIR / "Makefile").read_text()

    assert [command for command in commands if command] == ["make run", "make test"]
    assert re.search(r"^run:", makefile, re.MULTILINE)
    assert re.search(r"^test:", makefile, re.MULTILINE)
    assert "http://127.0.0.1:8000/" in quickstart


def test_the_readme_says_nothing_is_still_to_come_for_pages_that_exist():
    assert "come with a later step" not in README
    assert "/memory/" in section("Your memory")


def test_the_readme_says_how_to_make_a_staff_account_with_each_role():
    console = " ".join(section("Staff console").split())
    makefile = (settings.BASE_DIR / "Makefile").read_text()

    assert "make staff-user STAFF=" in console
    assert "ROLE=admin" in console
    assert "staff_user_create" in console
    assert "**Memory reviewers**" in console
    assert "**Memory admins**" in console
    assert re.search(r"^staff-user:", makefile, re.MULTILINE)


def test_the_readme_gives_the_development_switch_for_debug_mode():
    assert "make run DEBUG=true" in section("Quickstart")
    assert "| `DEBUG` | `false` |" in section("Configuration")


def test_every_file_the_readme_links_or_shows_exists():
    targets = re.findall(r"\]\(((?!https?://|#|mailto:)[^)\s]+)\)", README)
    missing = [
        target for target in targets if not (settings.BASE_DIR / target.split("#")[0]).exists()
    ]

    assert targets, "no relative links found: the pattern no longer matches"
    assert missing == [], "the README links to files the repository does not have"


def test_the_readme_shows_the_chats_features_and_says_how_to_take_the_screenshots():
    chat = section("Chat")
    shown = re.findall(r"!\[[^\]]+\]\((docs/[\w-]+\.png)\)", chat)
    script = "tests.browser.feature_screenshots"

    for name in ("attachments", "edit", "search", "phone"):
        assert f"docs/chat-{name}.png" in shown
        assert (settings.BASE_DIR / "docs" / f"chat-{name}.png").stat().st_size < 300_000
    assert f"python -m {script}" in chat
    assert (settings.BASE_DIR / "tests" / "browser" / "feature_screenshots.py").exists()
