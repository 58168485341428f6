"""What the session store tells the layers above it, which it may not import."""

from django.dispatch import Signal

# Sent inside a rewind's transaction, with ``session_id`` (the session row's key, as its foreign
# keys hold it), once the rewound events are marked: long-term memory revises what it derived
# from them (memory_app.apps). With ``restored_from_sequence``, the lowest sequence of the
# events the rewind brought back into the history (a rewind to a turn an earlier rewind took
# out), or None.
session_rewound = Signal()
