"""The service-account API in the API reference: one part of its own, and what each operation
does in words of its own (the views' ``extend_schema`` give the summaries, parameters and
answers, and a few a description; the others read their base view's docstring)."""

from __future__ import annotations

from typing import Any

TAG = "Apps"
PATH_PREFIX = "/api/v1/apps/"

DESCRIPTIONS = {
    "v1_memory_lifetime_retrieve": (
        "`follow_sources` (the default): a deleted session takes the memories drawn only from "
        "it, and those with other sources are derived again from what remains; "
        "`outlive_sessions`: memories stay when their session is deleted, their history "
        "saying that it was."
    ),
    "v1_memory_lifetime_update": (
        "Sets the app's `memory_lifetime`; sessions deleted from then on follow it."
    ),
    "v1_app_state_retrieve": (
        "Every `app:` key of the app's state with its value: what all of the app's users share."
    ),
    "v1_users_list": (
        "The app's end users a page at a time, by their id in the app (the `user_id` of the "
        "other operations), with when each was first seen."
    ),
    "v1_users_export": (
        "Everything kept about the end user as one JSON document: the same document the "
        "Settings page's Export my data gives a person."
    ),
    "v1_sessions_list": (
        "The end user's sessions in the app without their events, most recently updated "
        "first, a page at a time (`page_size`, `page_token`)."
    ),
    "v1_sessions_create": (
        "Creates a session, with an id of the caller's or a new one, and its initial state; "
        "an end user the app has not seen yet is created with it."
    ),
    "v1_sessions_retrieve": (
        "The session with its state merged across scopes and its events, all or the last "
        "`num_recent_events` or those after a time, as ADK's get_session answers."
    ),
    "v1_sessions_destroy": (
        "Deletes the session with its events and its session-scoped state; memories drawn "
        "from it are revised in the background."
    ),
    "v1_sessions_rewind_create": (
        "Takes the session back to just before an invocation, as ADK's Runner.rewind_async "
        "does: later events stay stored, marked out of the history by the rewind's event, and "
        "their state changes are undone; rewinding to a turn an earlier rewind took out brings "
        "that point back."
    ),
    "v1_user_state_retrieve": (
        "Every `user:` key of the end user's state in the app: what all of that user's "
        "sessions share."
    ),
    "v1_memories_search": (
        "The end user's memories, and the app's shared ones, ranked for a query by the "
        "retrieval the agent uses, as ADK's search_memory answers."
    ),
    "v1_memories_destroy": (
        "Deletes one of the end user's memories with its sources and history (ADK's "
        "delete_memory); another user's or an unknown id answers 404."
    ),
    "v1_jobs_retrieve": (
        "Where a generation job of the app stands (queued, running, done, failed or dead), "
        "with the error of one that failed: how a caller follows a 202 of memory generation."
    ),
    "v1_app_memories_list": (
        "The app's shared memories, known to the agent of every user of the app, newest "
        "first, a page at a time."
    ),
    "v1_app_memories_destroy": (
        "Deletes one of the app's shared memories, which no user's agent is given again; an "
        "unknown id answers 404."
    ),
}


def service_operations_describe(result: dict[str, Any], **kwargs) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the operations under ``/api/v1/apps/`` are the
    "Apps" part, each with its own description."""
    for path, methods in result.get("paths", {}).items():
        if not path.startswith(PATH_PREFIX):
            continue
        for operation in methods.values():
            operation["tags"] = [TAG]
            description = DESCRIPTIONS.get(operation.get("operationId", ""))
            if description:
                operation["description"] = description
    return result
