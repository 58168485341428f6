"""Safety of memory text: what may never become an active memory, and PII redaction.

A memory is placed in future system instructions, so its text is checked before it is
committed (:func:`memory_text_check`). It is refused, and the memory quarantined for review,
when it contains:

1. an attempt to steer the agent: "ignore/disregard/forget/override ... previous/prior/above/
   system ... instructions/rules/prompts"; "system prompt", "system instruction(s)", "system
   message", "developer mode", "jailbreak"; a role marker ("system:" or "assistant:" opening the
   text, "<|system|>", "<|im_start|>"); the agent told what it must do ("you/the assistant/the
   agent/the AI/the model/the bot must|should|shall|will|has to|needs to always|never|from now
   on|ignore|obey|reveal"); "from now on" in the same sentence as "you" or the agent; an
   imperative to the agent opening a sentence ("Always|Never respond/reply/answer/say/reveal/
   obey/follow/ignore/use/output/tell/mention");
2. a secret: an API key or token (``sk-...``, ``AKIA``/``ASIA`` AWS key ids, GitHub ``ghp_``/
   ``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, Google ``AIza...``, Slack ``xox?-``, a
   JWT), a private key block, or a credential stated with its value ("password/passcode/
   passphrase/pwd is|: X", "PIN is 1234", "API key/access token/secret key is|: X").

Ordinary facts pass: "works on system design", "the password manager is Bitwarden", "changed
the password yesterday", "will always remember Lisbon" (nobody tells the agent anything).

PII is redacted (:func:`pii_redact`) only for apps that ask for it in
``settings.MEMORY_PII_REDACTION = {app_name: True}`` (default: off): e-mail addresses,
Luhn-valid payment card numbers, US social security numbers and phone numbers (international
"+..." numbers, "(555) 123-4567" and "555-123-4567" forms) become ``[email]``, ``[card]``,
``[national id]`` and ``[phone]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

_AGENT = r"(?:you|the\s+(?:assistant|agent|ai|model|bot|chatbot))"

_INSTRUCTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "asks to ignore the agent's instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}?"
            r"\b(?:previous|prior|above|earlier|preceding|all|your|system|safety)\b"
            r"[^.!?\n]{0,20}?\b(?:instructions?|rules|prompts?|guidelines|directives)\b",
            re.I,
        ),
    ),
    (
        "mentions the agent's system prompt",
        re.compile(
            r"\bsystem\s+(?:prompts?|instructions?|message)\b|\bdeveloper\s+mode\b|\bjailbreak",
            re.I,
        ),
    ),
    (
        "carries a role marker",
        re.compile(r"^\s*(?:system|assistant)\s*:|<\|\s*(?:system|im_start)", re.I),
    ),
    (
        "tells the agent what it must do",
        re.compile(
            _AGENT + r"\s+(?:must|should|shall|will|has\s+to|have\s+to|needs?\s+to)\s+"
            r"(?:always|never|from\s+now\s+on|ignore|obey|reveal)\b",
            re.I,
        ),
    ),
    (
        "sets a rule for the agent from now on",
        re.compile(
            r"\bfrom\s+now\s+on\b[^.!?\n]*\b"
            + _AGENT
            + r"\b|\b"
            + _AGENT
            + r"\b[^.!?\n]*\bfrom\s+now\s+on\b",
            re.I,
        ),
    ),
    (
        "gives the agent an order",
        re.compile(
            r"(?:^|[.!?]\s+)(?:always|never)\s+(?:respond|reply|answer|say|reveal|obey|follow|"
            r"ignore|use|output|tell|mention)\b",
            re.I,
        ),
    ),
)

_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key", re.compile(r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_-]{20,}")),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("a JSON web token", re.compile(r"\beyJ[\w-]{10,}\.eyJ[\w-]{10,}\.[\w-]{10,}")),
    (
        "a private key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:.*?-----END (?:[A-Z0-9]+ )*"
            r"PRIVATE KEY-----)?",
            re.S,
        ),
    ),
    (
        "a password",
        re.compile(r"\b(?:password|passcode|passphrase|passwd|pwd)\s*(?:is|was|=|:)\s*\S+", re.I),
    ),
    ("a PIN", re.compile(r"\bpin(?:\s+code)?\s*(?:is|was|=|:)\s*\d{4,8}\b", re.I)),
    (
        "a credential",
        re.compile(
            r"\b(?:api[\s_-]?key|access[\s_-]?token|auth[\s_-]?token|secret[\s_-]?key|"
            r"client[\s_-]?secret)\s*(?:is|was|=|:)\s*\S{8,}",
            re.I,
        ),
    ),
)


@dataclass(frozen=True)
class SafetyVerdict:
    """Whether a text may be stored as an active memory; ``reason`` says why not (never quoting
    a secret)."""

    ok: bool
    reason: str = ""


def memory_text_check(*, text: str) -> SafetyVerdict:
    """Refuse text that would steer the agent or leak a secret once placed in a prompt."""
    for label, pattern in _SECRET_PATTERNS:
        if pattern.search(text):
            return SafetyVerdict(ok=False, reason=f"contains a secret ({label})")
    for label, pattern in _INSTRUCTION_PATTERNS:
        match = pattern.search(text)
        if match:
            quoted = " ".join(match.group(0).split())
            return SafetyVerdict(ok=False, reason=f'instruction-like: {label} ("{quoted}")')
    return SafetyVerdict(ok=True)


def secrets_mask(*, text: str) -> str:
    """``text`` with every secret replaced by ``[secret]``, so a quarantined memory kept for
    review does not store the secret itself."""
    for _label, pattern in _SECRET_PATTERNS:
        text = pattern.sub("[secret]", text)
    return text


_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:"
    r"\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{1,4}(?:[\s.-]?\d{2,4}){1,4}"
    r"|\(\d{3}\)\s?\d{3}[\s.-]?\d{4}"
    r"|\d{3}[\s.-]\d{3}[\s.-]\d{4}"
    r")(?!\w)"
)


def _luhn_valid(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _card_replace(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[card]" if 13 <= len(digits) <= 19 and _luhn_valid(digits) else match.group(0)


def _phone_replace(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[phone]" if 7 <= len(digits) <= 15 else match.group(0)


def pii_redaction_enabled(*, app_name: str) -> bool:
    """Whether ``settings.MEMORY_PII_REDACTION`` turns redaction on for ``app_name`` (off by
    default: an app that needs a user's phone number remembered must not lose it)."""
    return bool(settings.MEMORY_PII_REDACTION.get(app_name, False))


def pii_redact(*, text: str, app_name: str) -> str:
    """``text`` with e-mails, card numbers, national ids and phone numbers replaced by
    placeholders when the app asks for redaction; unchanged otherwise.

    Cards go first (a Luhn check keeps order numbers and ids that fail it), then social
    security numbers, then phones, so one number is never half-replaced by two rules.
    """
    if not pii_redaction_enabled(app_name=app_name):
        return text
    text = _EMAIL.sub("[email]", text)
    text = _CARD.sub(_card_replace, text)
    text = _SSN.sub("[national id]", text)
    return _PHONE.sub(_phone_replace, text)
