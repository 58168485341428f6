"""The staff console over long-term memory: memories with their provenance, generation jobs,
topics.

Nothing here writes a memory or a job by itself: content is read-only, and every change is an
admin action that asks for a reason on a confirmation page and calls
``memory_app.services.review``.

A module per area, each registering its ModelAdmins when imported (as Django's autodiscovery
imports this package):

- ``memories``: memories, their filters, provenance page and review actions;
- ``jobs``: generation jobs, the chart of the last day's jobs by status, retry;
- ``embeddings``: embedding tasks that gave up, and the embedding warnings;
- ``topics``: memory topics and their few-shot examples;
- ``actions``: what the actions share (the reason asked on a confirmation page, the report of
  what was done, the re-run of generation for sessions);
- ``sessions``: the sessions admin with the re-run of generation as an action.

Staff views are written to the audit log of the user whose data they showed
(``access_app.audit``).
"""

from memory_app.admin.actions import ReasonForm, reason_confirmed, sessions_regenerate
from memory_app.admin.embeddings import EmbeddingFailureAdmin, EmbeddingWarningAdmin
from memory_app.admin.jobs import GenerationJobAdmin, StatusChart
from memory_app.admin.memories import (
    CONFIDENCE_RANGES,
    ConfidenceRangeFilter,
    MemoryAdmin,
    QuarantinedFilter,
)
from memory_app.admin.sessions import SessionRecordAdmin
from memory_app.admin.topics import MemoryTopicAdmin, MemoryTopicForm

__all__ = [
    "CONFIDENCE_RANGES",
    "ConfidenceRangeFilter",
    "EmbeddingFailureAdmin",
    "EmbeddingWarningAdmin",
    "GenerationJobAdmin",
    "MemoryAdmin",
    "MemoryTopicAdmin",
    "MemoryTopicForm",
    "QuarantinedFilter",
    "ReasonForm",
    "SessionRecordAdmin",
    "StatusChart",
    "reason_confirmed",
    "sessions_regenerate",
]
