"""The agent runtime: one invocation of the context-engineering loop per user turn.

Fetch context (session, state, memories), prepare it (instruction templating,
compaction, token budget), call the model and tools, persist every event
through ``SessionService``, and stream partial events to the caller.
"""
