"""Checks of client text that every door into the store (REST, WebSocket) makes alike."""


def text_encodable(text: str) -> bool:
    """False for text with a lone surrogate (``\\ud800``): JSON can carry one, but UTF-8,
    and so no database, cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
