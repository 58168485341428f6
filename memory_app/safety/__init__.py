"""Safety of memory text: what may never become an active memory, and PII redaction.

A memory is placed in future system instructions, so its text is checked before it is
committed (:func:`memory_text_check`), on every way in alike: extraction and consolidation, the
agent's ``create_memory`` tool, the service API's ``add_memory`` and a user's correction. It is
refused, and the memory quarantined for review, when any form of it, read as a model reads it
(see :mod:`.normalise`: NFKC without invisible characters; HTML entities decoded; look-alike
letters, digits and signs folded; words spelled out letter by letter, hyphenated or split
joined; base64 runs decoded) carries:

1. an instruction to the agent (:mod:`.patterns`): orders to drop its instructions (or all
   that came before) and mentions of its system prompt in each language the check reads
   (English, French, Spanish, German, Italian, Portuguese, Dutch, Chinese, Japanese, Korean,
   Russian); role markers ("system:" after markup or punctuation, "<|im_start|>", "[INST]"),
   claimed overrides ("SYSTEM OVERRIDE"), markup that could close the memories' data block,
   Markdown images; the agent told what it must do, a rule "from now on", an order opening a
   sentence ("Always respond ..."), a new identity ("you are now DAN"), a request for its
   instructions, an order to call a tool;
2. a secret: an API key or token (``sk-...``, AWS, GitHub, Google, Slack, a JWT), a private
   key block, or a credential stated with its value ("password/pass word/p@ssword is X",
   "PIN is 1234", "API key: X");
3. text in a language the check does not read, or encoded text: either may hide the above.
   The language is told apart for the text's other scripts on their own too, so an English
   date or speaker before them does not make the text "mostly English".

Ordinary facts pass: "works on system design", "the password manager is Bitwarden", "changed
the password yesterday", "will always remember Lisbon" (nobody tells the agent anything).
A memory held for review stays held until staff decide: a user's correction cannot release it.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory_app.safety.language import unchecked_language
from memory_app.safety.normalise import (
    encoded_texts,
    spelled_out_runs,
    text_folded,
    text_normalise,
)
from memory_app.safety.patterns import (
    INSTRUCTION_PATTERNS,
    SECRET_PATTERNS,
    SPELLED_OUT_PATTERNS,
)
from memory_app.safety.pii import (
    card_numbers_mask,
    payment_card_found,
    pii_redact,
    pii_redaction_enabled,
    pii_scrub,
)

__all__ = [
    "SafetyVerdict",
    "memory_text_check",
    "pii_redact",
    "pii_redaction_enabled",
    "pii_scrub",
    "secrets_mask",
    "text_normalise",
]

SECRET_WITHHELD = "[withheld: the text holds a secret]"


@dataclass(frozen=True)
class SafetyVerdict:
    """Whether a text may be stored as an active memory; ``reason`` says why not (never quoting
    a secret)."""

    ok: bool
    reason: str = ""


def _forms(text: str) -> list[str]:
    forms = [text_normalise(text), text_folded(text)]
    for decoded in encoded_texts(text):
        forms += [text_normalise(decoded), text_folded(decoded)]
    return forms


def _secret_found(forms: list[str]) -> str | None:
    for form in forms:
        for label, pattern in SECRET_PATTERNS:
            if pattern.search(form):
                return label
        if payment_card_found(form):
            return "a payment card number"
    return None


# What staff's guidance for an app's agent is meant to do (app memories are followed as
# instructions): tell the agent how to work. An order to drop its instructions or its limits,
# role markup or a secret is refused there too.
PROCEDURAL_LABELS = frozenset(
    {
        "tells the agent what it must do",
        "sets a rule for the agent from now on",
        "gives the agent an order",
    }
)


def memory_text_check(*, text: str, procedural: bool = False) -> SafetyVerdict:
    """Refuse text that would steer the agent or leak a secret once placed in a prompt.

    ``procedural``: the text is guidance staff give the app's agent (an app memory), which
    may tell it what to do ("Always answer in French"); everything else of the check holds,
    the language check too (guidance in a language the check cannot read may hide an order
    to drop the agent's instructions)."""
    forms = _forms(text)
    secret = _secret_found(forms)
    if secret:
        return SafetyVerdict(ok=False, reason=f"contains a secret ({secret})")
    checks = [(form, INSTRUCTION_PATTERNS) for form in forms]
    checks += [(run, SPELLED_OUT_PATTERNS) for run in spelled_out_runs(text)]
    for form, patterns in checks:
        for label, pattern in patterns:
            if procedural and label in PROCEDURAL_LABELS:
                continue
            match = pattern.search(form)
            if match:
                quoted = " ".join(match.group(0).split())
                return SafetyVerdict(ok=False, reason=f'instruction-like: {label} ("{quoted}")')
    normalised = forms[0]
    if len(forms) > 2:
        return SafetyVerdict(ok=False, reason="suspect: carries encoded or hidden text")
    language = unchecked_language(normalised)
    if language:
        return SafetyVerdict(
            ok=False,
            reason=f"suspect: written in a language the safety check does not read ({language})",
        )
    return SafetyVerdict(ok=True)


def secrets_mask(*, text: str) -> str:
    """``text`` with every secret replaced by ``[secret]``, so a quarantined memory kept for
    review does not store the secret itself. A secret seen only in a disguised form (look-alike
    letters, encoded) cannot be cut out alone: the whole text is withheld then."""
    masked = text_normalise(text)
    for _label, pattern in SECRET_PATTERNS:
        masked = pattern.sub("[secret]", masked)
    masked = card_numbers_mask(masked)
    if _secret_found(_forms(masked)):
        return SECRET_WITHHELD
    return masked
