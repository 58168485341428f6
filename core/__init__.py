"""Shared infrastructure below every app: what the apps import and nothing they own.

Async database access, outage errors, log context, metrics of turns, API throttling, background
dispatch, Redis clients, worker heartbeats, user notices over the channel layer, the console's
read-only admin base, the REST API's shared pieces, and the model clients (the ``Llm`` interface,
Gemini) that both the agents and memory extraction use. Nothing here imports an app: the layers,
top to bottom, are chatapp > agents_app > memory_app > sessions_app > access_app > core, and an
import-linter contract (``.importlinter``, run by the test suite) holds them.
"""
