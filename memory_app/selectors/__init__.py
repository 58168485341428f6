"""Reads of long-term memory, a module per concern:

- ``search``: search over what a user may see (BM25 and embeddings, re-read from the database)
  and the per-process index cache behind it;
- ``memories``: one user's own memories and choices, for their Memory page and the API;
- ``past_conversations``: search of the user's own turns in their past chats, a second source
  beside memories, read from the session store (never stored as memories);
- ``generation``: what decides and feeds generation (triggers, a session's memory access, the
  facts of a turn, events' text, watermarks);
- ``console``: the staff console's reads (a memory's provenance and history, job counts).
"""

from memory_app.selectors.console import (
    memory_job_status_counts,
    memory_provenance_sources,
    memory_revisions,
)
from memory_app.selectors.generation import (
    PendingMemory,
    SessionMemoryAccess,
    TriggerConfig,
    TurnTriggerFacts,
    content_text,
    event_excerpt,
    event_text,
    memory_session_key,
    session_memory_access,
    session_memory_access_of_id_read,
    session_memory_access_read,
    session_pending_memory,
    session_user_event_get,
    trigger_config_get,
    trigger_config_get_async,
    turn_trigger_facts,
    turn_trigger_facts_of_id_read,
    turn_trigger_facts_read,
    watermark_get,
)
from memory_app.selectors.memories import (
    ProfileEntry,
    app_guidance,
    app_guidance_read,
    memory_get,
    memory_settings_get,
    profile_active,
    profile_entries,
    user_memories,
    user_memories_matching,
    user_profile,
)
from memory_app.selectors.past_conversations import (
    PastTurn,
    past_conversations_allowed,
    past_conversations_search,
)
from memory_app.selectors.search import (
    ScoredMemory,
    SourceRef,
    memory_search,
)

__all__ = [
    "PastTurn",
    "PendingMemory",
    "ProfileEntry",
    "ScoredMemory",
    "SessionMemoryAccess",
    "SourceRef",
    "TriggerConfig",
    "TurnTriggerFacts",
    "app_guidance",
    "app_guidance_read",
    "content_text",
    "event_excerpt",
    "event_text",
    "memory_get",
    "memory_job_status_counts",
    "memory_provenance_sources",
    "memory_revisions",
    "memory_search",
    "memory_session_key",
    "memory_settings_get",
    "past_conversations_allowed",
    "past_conversations_search",
    "profile_active",
    "profile_entries",
    "session_memory_access",
    "session_memory_access_of_id_read",
    "session_memory_access_read",
    "session_pending_memory",
    "session_user_event_get",
    "trigger_config_get",
    "trigger_config_get_async",
    "turn_trigger_facts",
    "turn_trigger_facts_of_id_read",
    "turn_trigger_facts_read",
    "user_memories",
    "user_memories_matching",
    "user_profile",
    "watermark_get",
]
