"""Writes of long-term memory: generation jobs, settings, memories added or deleted by hand, and
what a deleted session takes with it.

Generation never runs on a turn's hot path: a trigger creates a ``GenerationJob`` and enqueues
it after commit; a worker runs it with :func:`memory_job_run`. The model call (extraction)
happens outside any lock; the write phase then takes the user's lock (a row lock on their
``MemorySettings`` row), re-checks the user's choice and the session's watermark, and stores
the consolidation results and the new watermark in one transaction. So jobs of one user never
interleave their writes, each event is processed once, and a job run twice changes nothing the
second time.

Every write that changes what a user's searches can return calls ``memory_index_invalidate``.
"""

from memory_app.services.embeddings import (
    EmbeddingReport,
    embedder_active,
    embedding_failure_record,
    embeddings_compute,
    embeddings_missing_count,
    embeddings_missing_fill,
    memory_embeddings_request,
    turn_embeddings_request,
    turn_vector_index_ensure,
)
from memory_app.services.forgetting import ForgetRequestReport, memories_forget_requested
from memory_app.services.jobs import (
    memory_job_fail,
    memory_job_request,
    memory_job_retries_left,
    memory_job_retry_note,
    memory_job_run,
    memory_jobs_redispatch,
    memory_jobs_waiting_wake,
)
from memory_app.services.memories import (
    ForgetReport,
    MemoryCorrectionError,
    memories_delete_all,
    memories_forget,
    memory_add_stated,
    memory_correct,
    memory_create_explicit,
    memory_delete,
    memory_expiry_set,
    memory_facts_store,
    profile_field_correct,
)
from memory_app.services.memory_files import memory_image_release
from memory_app.services.profile import profile_state_sync
from memory_app.services.rederivation import (
    memory_rederivations_sweep,
    memory_rederive,
    memory_rederive_fail,
)
from memory_app.services.releases import (
    SessionReleaseReport,
    artifact_memories_release,
    rewind_releases_sweep,
    session_memories_release,
    session_rewound_memories_release,
    session_rewound_release_request,
)
from memory_app.services.triggers import (
    memory_session_end,
    memory_session_left,
    memory_session_opened,
    memory_sessions_idle_enqueue,
    memory_sessions_left_enqueue,
    memory_turn_completed,
    memory_turn_trigger,
    memory_turn_trigger_async,
)
from memory_app.services.users import (
    memory_change_notice_send,
    memory_index_invalidate,
    memory_index_invalidations_merged,
    memory_notices_send,
    memory_settings_update,
    user_lock,
)

__all__ = [
    "EmbeddingReport",
    "ForgetReport",
    "ForgetRequestReport",
    "MemoryCorrectionError",
    "SessionReleaseReport",
    "artifact_memories_release",
    "embedder_active",
    "embedding_failure_record",
    "embeddings_compute",
    "embeddings_missing_count",
    "embeddings_missing_fill",
    "memories_delete_all",
    "memories_forget",
    "memories_forget_requested",
    "memory_add_stated",
    "memory_change_notice_send",
    "memory_correct",
    "memory_create_explicit",
    "memory_delete",
    "memory_embeddings_request",
    "memory_expiry_set",
    "memory_facts_store",
    "memory_image_release",
    "memory_index_invalidate",
    "memory_index_invalidations_merged",
    "memory_job_fail",
    "memory_job_request",
    "memory_job_retries_left",
    "memory_job_retry_note",
    "memory_job_run",
    "memory_jobs_redispatch",
    "memory_jobs_waiting_wake",
    "memory_notices_send",
    "memory_rederivations_sweep",
    "memory_rederive",
    "memory_rederive_fail",
    "memory_session_end",
    "memory_session_left",
    "memory_session_opened",
    "memory_sessions_idle_enqueue",
    "memory_sessions_left_enqueue",
    "memory_settings_update",
    "memory_turn_completed",
    "memory_turn_trigger",
    "memory_turn_trigger_async",
    "profile_field_correct",
    "profile_state_sync",
    "rewind_releases_sweep",
    "session_memories_release",
    "session_rewound_memories_release",
    "session_rewound_release_request",
    "turn_embeddings_request",
    "turn_vector_index_ensure",
    "user_lock",
]
