"""Apps and their agents: the agent runtime (one turn of the context-engineering loop), the chat
page and its WebSocket, and the glue that plugs long-term memory into the runner."""
