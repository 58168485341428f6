"""What the safety check looks for: instructions to the agent, in each language it reads, and
secrets. Each pattern comes with the label the verdict names it by.

The instruction patterns cover the injections of the OWASP Top 10 for LLM applications that a
stored memory can carry: orders to drop the agent's instructions, role markers and markup that
would close the memories' data block, system-prompt extraction, persona hijacking ("you are now
DAN"), orders to call tools (excessive agency), and Markdown images or HTML that could
exfiltrate data when rendered. They are matched against the normalised text and its folded
form (see :mod:`memory_app.safety.normalise`), so they are written in lower case terms and
case-insensitive.
"""

from __future__ import annotations

import re

_AGENT = r"(?:you|the\s+(?:assistant|agent|ai|model|bot|chatbot|llm))"
_BEFORE = r"[^.!?\n]{0,60}?"

# Languages whose instruction wording the check reads (py3langid codes). Text confidently in
# another language is held for review (see memory_app.safety.language).
CHECKED_LANGUAGES = ("en", "fr", "es", "de", "it", "pt", "nl")


def _words(*alternatives: str) -> str:
    return r"\b(?:" + "|".join(alternatives) + r")"


_IGNORE_WORDS = {
    "en": _words("ignore", "disregard", "forget", "override", "bypass"),
    "fr": _words(r"ignor\w*", r"oubli\w*", r"néglig\w*", r"contourn\w*", r"ne\s+tiens?\s+pas"),
    "es": _words(r"ignor\w*", r"olvid\w*", r"omit\w*", r"descart\w*", r"pasa\s+por\s+alto"),
    "de": _words(r"ignorier\w*", r"vergiss\w*", r"vergessen", r"missacht\w*", r"übergeh\w*"),
    "it": _words(r"ignor\w*", r"dimentic\w*", r"trascur\w*", r"non\s+considerare"),
    "pt": _words(r"ignor\w*", r"esque[cç]\w*", r"desconsider\w*", r"despreze"),
    "nl": _words(r"negeer\w*", r"vergeet", r"vergeten", r"omzeil\w*"),
}
_RULE_WORDS = {
    "en": _words(r"instructions?", "rules", r"prompts?", "guidelines", "directives", "guardrails"),
    "fr": _words(r"instructions?", r"consignes?", r"règles?", r"directives?", r"prompts?"),
    "es": _words("instrucciones", r"reglas?", "indicaciones", r"directrices", r"prompts?"),
    "de": _words(r"anweisung\w*", r"regeln", r"vorgaben", r"instruktion\w*", r"richtlinien"),
    "it": _words(r"istruzion\w*", r"regole", r"direttive", r"prompt"),
    "pt": _words(r"instru[cç][õo]es", r"regras", r"diretrizes", r"prompts?"),
    "nl": _words(r"instructies", r"regels", r"richtlijnen", r"prompts?"),
}
_SYSTEM_PROMPT = {
    "en": r"\bsystem\s*(?:prompts?|instructions?|message)\b|\bdeveloper\s+mode\b|\bjailbr[eo]a?k",
    "fr": r"\b(?:prompt|message|instructions?)\s+(?:du\s+)?syst[eè]me\b|\bmode\s+d[ée]veloppeur",
    "es": r"\b(?:prompt|mensaje|instrucciones)\s+del\s+sistema\b|\bmodo\s+desarrollador",
    "de": r"\bsystem\s*(?:prompt|nachricht|anweisung\w*)\b|\bentwicklermodus",
    "it": r"\b(?:prompt|messaggio|istruzioni)\s+di\s+sistema\b|\bmodalit[àa]\s+sviluppatore",
    "pt": r"\b(?:prompt|mensagem|instru[cç][õo]es)\s+do\s+sistema\b|\bmodo\s+desenvolvedor",
    "nl": r"\bsysteem\s*(?:prompt|bericht|instructies)\b|\bontwikkelaarsmodus",
}


def _language_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    patterns = []
    for language in CHECKED_LANGUAGES:
        patterns.append(
            (
                "asks to ignore the agent's instructions",
                re.compile(
                    _IGNORE_WORDS[language] + r"\b[^.!?\n]{0,60}?" + _RULE_WORDS[language] + r"\b",
                    re.I,
                ),
            )
        )
        patterns.append(
            ("mentions the agent's system prompt", re.compile(_SYSTEM_PROMPT[language], re.I))
        )
    return tuple(patterns)


INSTRUCTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *_language_patterns(),
    (
        "carries a role marker",
        re.compile(
            r"(?:^|[\n.!?:;>\]]\s*)(?:system|assistant|developer|admin|root)\s*(?:override\s*)?:"
            r"|<\|\s*(?:system|im_start|im_end|endoftext)|\[/?inst\]|<</?sys>>"
            r"|^\s*#{2,}\s*(?:system|instruction|response)\b",
            re.I | re.M,
        ),
    ),
    (
        "claims an override",
        re.compile(
            r"\b(?:system|admin|developer|root)\s+(?:override|command|directive)\b"
            r"|\b(?:security|emergency|safety)\s+override\b",
            re.I,
        ),
    ),
    (
        "carries markup that could close the memories block",
        re.compile(r"</?[a-z_|!][^<>\n]{0,60}>", re.I),
    ),
    ("carries a Markdown image", re.compile(r"!\[[^\]\n]*\]\(")),
    (
        "tells the agent what it must do",
        re.compile(
            _AGENT + r"\s+(?:must|should|shall|will|has\s+to|have\s+to|needs?\s+to|are\s+to)\s+"
            r"(?:always|never|from\s+now\s+on|ignore|obey|reveal|forget|comply)\b",
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
            r"(?:^|[.!?:]\s+)(?:always|never)\s+(?:respond|reply|answer|say|reveal|obey|follow|"
            r"ignore|use|output|tell|mention|call|send|share|include)\b",
            re.I | re.M,
        ),
    ),
    (
        "gives the agent a new identity",
        re.compile(
            r"\b(?:you\s+are\s+now\s+(?:an?|the|in\s+\w+\s+mode|called|named|dan|free|"
            r"unrestricted|unfiltered|jailbroken)|you\s+are\s+no\s+longer"
            r"|pretend\s+(?:to\s+be|you\s+are)"
            r"|act\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|jailbroken|evil|dan)"
            r"|roleplay\s+as|do\s+anything\s+now)\b",
            re.I,
        ),
    ),
    (
        "asks for the agent's instructions",
        re.compile(
            r"\b(?:repeat|print|reveal|show|output|display|leak|recite|dump)\b[^.!?\n]{0,40}?"
            r"\b(?:words|text|instructions|prompt|everything|context)\s+(?:above|before|so\s+far)"
            r"|\b(?:print|reveal|show|output|display|leak|dump)\s+(?:your|the)\s+"
            r"(?:instructions|prompt|configuration|rules|secrets?)\b",
            re.I,
        ),
    ),
    (
        "orders a tool call",
        re.compile(
            r"\b(?:call|invoke|run|execute|trigger)\s+(?:the\s+)?[\w.-]+\s+(?:tool|function)\b"
            r"|\b(?:call|invoke|execute)\s+[a-z]+_[a-z_]+\s*\(",
            re.I,
        ),
    ),
)

_PASSWORD = (
    r"(?:pass\s*words?|pass\s*codes?|pass\s*phrases?|passwd|pwd|mot\s+de\s+passe"
    r"|contrase[nñ]a|passwort|kennwort|wachtwoord|senha)"
)
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
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
        re.compile(r"\b" + _PASSWORD + r"\s*(?:is|was|=|:|est|es|ist|is\s+now|é)\s*\S+", re.I),
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
