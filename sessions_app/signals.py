"""What the session store tells the layers above it, which it may not import."""

from django.dispatch import Signal

# Sent inside a rewind's transaction, with ``session_id``, once the rewound events are marked:
# long-term memory revises what it derived from them (memory_app.apps).
session_rewound = Signal()
