"""PII redaction of memory text, per app (``settings.MEMORY_PII_REDACTION = {app_name: True}``,
off by default): e-mail addresses, Luhn-valid payment card numbers, US social security numbers
and phone numbers (international "+..." numbers, "(555) 123-4567" and "555-123-4567" forms)
become ``[email]``, ``[card]``, ``[national id]`` and ``[phone]``."""

from __future__ import annotations

import re

from sessions_app.app_policy import app_policy_get

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


def payment_card_found(text: str) -> bool:
    """Whether ``text`` holds a Luhn-valid payment card number (13 to 19 digits, spaced or
    dashed as printed on a card)."""
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _luhn_valid(digits):
            return True
    return False


def _card_replace(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[card]" if 13 <= len(digits) <= 19 and _luhn_valid(digits) else match.group(0)


def card_numbers_mask(text: str) -> str:
    """``text`` with each payment card number replaced by ``[secret]``."""
    return _CARD.sub(
        lambda match: "[secret]" if _card_replace(match) == "[card]" else match.group(0), text
    )


def _phone_replace(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[phone]" if 7 <= len(digits) <= 15 else match.group(0)


def pii_redaction_enabled(*, app_name: str) -> bool:
    """Whether the app turns redaction on (its record's setting, else
    ``settings.MEMORY_PII_REDACTION``); off by default: an app that needs a user's phone
    number remembered must not lose it."""
    return app_policy_get().app_settings(app_name=app_name).pii_redaction


def pii_redact(*, text: str, app_name: str) -> str:
    """``text`` with e-mails, card numbers, national ids and phone numbers replaced by
    placeholders when the app asks for redaction; unchanged otherwise.

    Cards go first (a Luhn check keeps order numbers and ids that fail it), then social
    security numbers, then phones, so one number is never half-replaced by two rules.
    """
    if not pii_redaction_enabled(app_name=app_name):
        return text
    return pii_scrub(text)


def pii_scrub(text: str) -> str:
    """``text`` with e-mails, card numbers, national ids and phone numbers replaced by
    placeholders, whatever the app (``pii_redact`` asks the app first)."""
    text = _EMAIL.sub("[email]", text)
    text = _CARD.sub(_card_replace, text)
    text = _SSN.sub("[national id]", text)
    return _PHONE.sub(_phone_replace, text)
