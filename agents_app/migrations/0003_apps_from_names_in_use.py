"""Every app name already in use becomes an app, and ``settings.AGENTS`` seeds the agents.

Names come from sessions, user and app state, memories, generation jobs and memory topics,
plus the site's default app and every app of ``settings.AGENTS``; each gets a record open to
every signed-in user, with the agent ``settings.AGENTS`` configures for it (or the default
agent), and its memory settings of ``MEMORY_TRIGGERS`` and ``MEMORY_PII_REDACTION``. A record
that exists is left alone, so the migration can run on a database that has some.
"""

import re

from django.conf import settings
from django.db import migrations

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")
COMPACTION_FIELDS = (
    "keep_last_invocations",
    "token_budget",
    "summarize_after_invocations",
    "max_events_loaded",
)
TRIGGER_FIELDS = (
    "every_n_turns",
    "every_turn",
    "session_idle_seconds",
    "session_left_seconds",
    "explicit",
)


def _names_in_use(apps) -> set[str]:
    names = {settings.DEFAULT_APP_NAME, *getattr(settings, "AGENTS", {})}
    for label, model in (
        ("sessions_app", "SessionRecord"),
        ("sessions_app", "UserState"),
        ("sessions_app", "AppState"),
        ("memory_app", "Memory"),
        ("memory_app", "GenerationJob"),
        ("memory_app", "MemoryTopic"),
    ):
        rows = apps.get_model(label, model).objects.order_by().values_list("app_name", flat=True)
        names.update(rows.distinct())
    return {name for name in names if name and NAME.match(name)}


def _fields_from_settings(name: str) -> dict:
    agent = dict(getattr(settings, "AGENTS", {}).get(name, {}))
    fields = {}
    for key in ("model", "instruction", "output_key", "preload_memories", "memory_tools"):
        if key in agent and agent[key] is not None and not callable(agent[key]):
            fields[key] = agent[key]
    if "name" in agent:
        fields["agent_name"] = agent["name"]
    if "tools" in agent:
        fields["tools"] = list(agent["tools"])
    if "max_steps" in agent:
        fields["max_steps"] = agent["max_steps"]
    compaction = agent.get("compaction") or {}
    if not isinstance(compaction, dict):
        compaction = vars(compaction)
    fields.update({key: compaction[key] for key in COMPACTION_FIELDS if key in compaction})
    triggers = settings.MEMORY_TRIGGERS.get(name, {})
    fields.update({f"trigger_{key}": triggers[key] for key in TRIGGER_FIELDS if key in triggers})
    if name in settings.MEMORY_PII_REDACTION:
        fields["pii_redaction"] = bool(settings.MEMORY_PII_REDACTION[name])
    return fields


def apps_create(apps, schema_editor) -> None:
    App = apps.get_model("agents_app", "App")
    existing = set(App.objects.values_list("name", flat=True))
    for name in sorted(_names_in_use(apps) - existing):
        App.objects.create(name=name, **_fields_from_settings(name))


class Migration(migrations.Migration):
    dependencies = [
        ("agents_app", "0002_apps_service_accounts_end_users"),
        ("sessions_app", "0004_event_content_verbatim_json"),
        ("memory_app", "0004_session_departure_and_left_trigger"),
    ]

    operations = [migrations.RunPython(apps_create, migrations.RunPython.noop)]
