"""Our chat server against ADK's own API server, the same workload on both in one run
(``python -m bench.chat_vs_adk``; docs/benchmarks.md)."""
