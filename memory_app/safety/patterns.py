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
_GAP = r"[^.!?。\n]{0,60}?"
_NEAR = r"[^.!?。\n]{0,30}?"

# Languages whose instruction wording the check reads (py3langid codes). Text confidently in
# another language is held for review (see memory_app.safety.language).
CHECKED_LANGUAGES = ("en", "fr", "es", "de", "it", "pt", "nl", "zh", "ja", "ko", "ru")
# Written without spaces between words, or with particles joined to them: a word ends anywhere.
_UNSPACED = ("zh", "ja", "ko")
# Languages whose order may name the instructions before the verb ("以前の指示を無視して").
_OBJECT_FIRST = ("zh", "ja", "ko")


def _words(*alternatives: str) -> str:
    return r"\b(?:" + "|".join(alternatives) + r")"


_IGNORE_WORDS = {
    "en": _words(
        "ignore",
        "disregard",
        "forget",
        "override",
        "bypass",
        r"(?:set|put|cast)\s+aside",
        "discard",
    ),
    "fr": _words(r"ignor\w*", r"oubli\w*", r"néglig\w*", r"contourn\w*", r"ne\s+tiens?\s+pas"),
    # Orders, not the past tense a person tells of themselves ("olvidé las instrucciones").
    "es": _words(
        r"ignor(?:a|e|en|ad|ar|ando)(?![\u0300-\u036f])",
        r"olv[ií]d(?:a|e|en|ad|ar|ando|ate|alo|ala)(?![\u0300-\u036f])",
        r"omit\w*",
        r"descart\w*",
        r"pasa\s+por\s+alto",
    ),
    "de": _words(r"ignorier\w*", r"vergiss\w*", r"vergessen", r"missacht\w*", r"übergeh\w*"),
    "it": _words(r"ignor\w*", r"dimentic\w*", r"trascur\w*", r"non\s+considerare"),
    "pt": _words(r"ignor\w*", r"esque[cç]\w*", r"desconsider\w*", r"despreze"),
    "nl": _words(r"negeer\w*", r"vergeet", r"vergeten", r"omzeil\w*"),
    "zh": "(?:忽略|忽视|忽視|无视|無視|忘记|忘記|忘掉|不要理会|不要理會|别管|別管|跳过|跳過"
    "|抛开|拋開|绕过|繞過|不要遵守|不再遵守|停止遵守)",
    "ja": "(?:無視|忘れ|従わない|従うな)",
    "ko": r"(?:무시|잊어|잊고|잊으|따르지\s*마)",
    "ru": _words(
        r"(?:про)?игнорир\w*",
        r"забудь\w*",
        "забыть",
        r"не\s+обращай\w*\s+внимани\w*",
        r"пренебреги\w*",
        r"отбрось\w*",
    ),
}
_RULE_WORDS = {
    "en": _words(r"instructions?", "rules", r"prompts?", "guidelines", "directives", "guardrails"),
    "fr": _words(r"instructions?", r"consignes?", r"règles?", r"directives?", r"prompts?"),
    "es": _words("instrucciones", r"reglas?", "indicaciones", r"directrices", r"prompts?"),
    "de": _words(r"anweisung\w*", r"regeln", r"vorgaben", r"instruktion\w*", r"richtlinien"),
    "it": _words(r"istruzion\w*", r"regole", r"direttive", r"prompt"),
    "pt": _words(r"instru[cç][õo]es", r"regras", r"diretrizes", r"prompts?"),
    "nl": _words(r"instructies", r"regels", r"richtlijnen", r"prompts?"),
    "zh": "(?:指令|指示|规则|規則|提示词|提示詞|设定|設定|命令|之前的一切|先前的一切)",
    "ja": "(?:指示|命令|ルール|規則|プロンプト|設定|制約|上記)",
    "ko": r"(?:지시|명령|규칙|프롬프트|지침|설정|위의|위\s*내용|이전\s*내용)",
    "ru": _words(
        r"инструкци\w*",
        r"правил\w*",
        r"указани\w*",
        r"промпт\w*",
        r"директив\w*",
        r"установк\w*",
        r"вышесказанн\w*",
        r"вс[её]\s+(?:выше|сказанное|предыдущее)",
    ),
}
# What an order to drop the agent's instructions may name instead: all that came before it.
_EVERYTHING_BEFORE = {
    "en": r"\b(?:(?:all|everything|anything)\s+(?:(?:that\s+)?(?:was|is|you\s+were)\s+"
    r"(?:said|written|told)\s+)?(?:above|previously|earlier|so\s+far|before\s+(?:this|that|now))"
    r"|the\s+above)\b",
    "fr": r"\b(?:tout\s+ce\s+qui\s+(?:pr[ée]c[eè]de|a\s+[ée]t[ée]\s+dit)|ci-dessus)",
    "es": r"\b(?:todo\s+lo\s+(?:anterior|de\s+arriba|dicho)|lo\s+anterior)\b",
    "de": r"\b(?:alles\s+(?:oben|vorherige|bisherige|bisher|davor|zuvor)\w*|das\s+obige)\b",
    "it": r"\btutto\s+(?:ci[òo]\s+che\s+precede|quanto\s+sopra|sopra|detto\s+prima)\b",
    "pt": r"\btudo\s+(?:acima|o\s+que\s+foi\s+dito|o\s+anterior|antes)\b",
    "nl": r"\balles\s+(?:hierboven|hiervoor|eerder|wat\s+eerder)\b",
    "zh": "(?:以上|上述|上面)的?(?:所有|全部|一切|内容|內容)",
    "ja": "以上(?:の(?:内容|指示|全て|すべて)|を)",
}
_SYSTEM_PROMPT = {
    "en": r"\bsystem\s*(?:prompts?|instructions?|message)\b|\bdeveloper\s+mode\b|\bjailbr[eo]a?k",
    "fr": r"\b(?:prompt|message|instructions?)\s+(?:du\s+)?syst[eè]me\b|\bmode\s+d[ée]veloppeur",
    "es": r"\b(?:prompt|mensaje|instrucciones)\s+del\s+sistema\b|\bmodo\s+desarrollador",
    "de": r"\bsystem\s*(?:prompt|nachricht|anweisung\w*)\b|\bentwicklermodus",
    "it": r"\b(?:prompt|messaggio|istruzioni)\s+di\s+sistema\b|\bmodalit[àa]\s+sviluppatore",
    "pt": r"\b(?:prompt|mensagem|instru[cç][õo]es)\s+do\s+sistema\b|\bmodo\s+desenvolvedor",
    "nl": r"\bsysteem\s*(?:prompt|bericht|instructies)\b|\bontwikkelaarsmodus",
    "zh": "系统提示|系統提示|系统指令|系統指令|系统消息|系統消息|系統訊息|系统设定|系統設定"
    "|开发者模式|開發者模式|越狱|越獄",
    "ja": "システムプロンプト|システム指示|システムメッセージ|開発者モード|脱獄|ジェイルブレイク",
    "ko": r"시스템\s*(?:프롬프트|지시|메시지)|개발자\s*모드|탈옥",
    "ru": r"\bсистемн\w*\s+(?:промпт|инструкци|сообщени|подсказк)\w*|\bрежим\w*\s+разработчика",  # noqa: RUF001
}
# The agent addressed with a rule for good ("from now on you ...", "you must always ...").
_ADDRESSED = {
    "zh": "(?:从现在(?:开始|起)|從現在(?:開始|起)|今后|今後)[^。!?\n]{0,20}?你"
    "|你(?:现在|現在)?(?:必须|必須|应该|應該|只能)(?:总是|總是|永远|永遠|始终|始終|一直|服从|服從"
    "|听从|聽從|无视|無視|忘记|忘記|透露)|你(?:现在|現在)是",
    "ja": "(?:これから|今後|今から)[^。!?\n]{0,20}?(?:あなた|君|お前)は"
    "|(?:あなた|君|お前)は(?:今から|これから)?(?:常に|必ず|絶対に)",
    "ko": r"(?:지금부터|이제부터|앞으로)[^.!?\n]{0,20}?(?:너는|넌|당신은)"
    r"|(?:너는|넌|당신은)\s*(?:항상|반드시|무조건)",
    "ru": r"\b(?:с\s+этого\s+момента|отныне|впредь)\b[^.!?\n]{0,40}?\b(?:ты|вы)\b"  # noqa: RUF001
    r"|\b(?:ты|вы)\s+(?:должен|должна|должны|обязан\w*)\s+(?:всегда|никогда|игнорир|подчин"
    r"|раскр)",
}


def _language_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    patterns = []
    for language in CHECKED_LANGUAGES:
        end = "" if language in _UNSPACED else r"\b"
        ignore, rules = _IGNORE_WORDS[language] + end, _RULE_WORDS[language] + end
        dropped = [ignore + _GAP + rules]
        if language in _OBJECT_FIRST:
            dropped.append(rules + _GAP + ignore)
        if language in _EVERYTHING_BEFORE:
            before = _EVERYTHING_BEFORE[language]
            dropped.append(ignore + _NEAR + before)
            if language in _OBJECT_FIRST:
                dropped.append(before + _NEAR + ignore)
        patterns.append(
            ("asks to ignore the agent's instructions", re.compile("|".join(dropped), re.I))
        )
        patterns.append(
            ("mentions the agent's system prompt", re.compile(_SYSTEM_PROMPT[language], re.I))
        )
        if language in _ADDRESSED:
            patterns.append(
                ("tells the agent what it must do", re.compile(_ADDRESSED[language], re.I))
            )
    return tuple(patterns)


def _squashed(pattern: str) -> str:
    return re.sub(r"\\b|\\s[+*]", "", pattern)


# The orders above as they read in a word spelled out letter by letter with no gap between
# words ("ignorepreviousinstructions"), where no word boundary or space is left to match.
SPELLED_OUT_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (label, re.compile(_squashed(pattern), re.I))
    for language in CHECKED_LANGUAGES
    for label, pattern in (
        (
            "asks to ignore the agent's instructions",
            _IGNORE_WORDS[language] + r"\w{0,40}?" + _RULE_WORDS[language],
        ),
        ("mentions the agent's system prompt", _SYSTEM_PROMPT[language]),
    )
)


INSTRUCTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *_language_patterns(),
    (
        "carries a role marker",
        re.compile(
            r"(?:^|[^\w\s,]\s*)(?:system|assistant|developer|admin|root)[*_\s]*(?:override[*_\s]*)?:"
            r"|<\|\s*(?:system|im_start|im_end|endoftext)|\[/?inst\]|<</?sys>>"
            r"|^\s*#{2,}\s*(?:system|instruction|response)\b"
            r"|[\"']role[\"']\s*:\s*[\"'](?:system|developer|assistant|tool)[\"']"
            # A transcript's turns on one line, as a form that joins lines leaves them.
            r"|\b(?:user|human)\s*:[^\n]{0,200}?\b(?:assistant|system|ai)\s*:",
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
        "asks the agent to drop its limits",
        re.compile(
            r"\b(?:obey|comply\s+with)\s+(?:\w+\s+){0,3}?(?:commands?|orders?|notes?|memor(?:y|ies)"
            r"|instructions|everything|anything|the\s+user)\b"
            r"|\bnever\s+refuse\b"
            r"|\b(?:answer|respond|repl(?:y|ie)|act|operate|talk)\w*\s+(?:to\s+)?(?:me\s+)?"
            r"without\s+(?:any\s+)?(?:restrictions|limits|filters?|rules|guardrails|censorship)",
            re.I,
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
# What a credential may be of before its value: "password for my online banking: ...",
# "mot de passe de ma banque : ...", "PIN del bancomat è ...".
_WHOSE = r"(?:\s+(?:for|of|to|at|de|del|da|do|du|di|für|van)\s+[^:=\n\d]{1,30}?)?"
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("an API key", re.compile(r"\bsk-(?:[A-Za-z]+-)?[A-Za-z0-9_-]{20,}")),
    ("a payment API key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
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
        re.compile(
            r"\b" + _PASSWORD + _WHOSE + r"\s*(?:is|was|=|:|est|es|ist|is\s+now|é|è)\s*\S+", re.I
        ),
    ),
    (
        "a PIN",
        re.compile(
            r"\bpin(?:\s+code)?" + _WHOSE + r"\s*(?:is|was|=|:|est|es|ist|é|è)\s*\d{4,8}\b", re.I
        ),
    ),
    (
        "a card security code",
        re.compile(
            r"\b(?:cvv2?|cvc2?|csc|card\s+security\s+code)\s*(?:is|was|=|:)?\s*\d{3,4}\b", re.I
        ),
    ),
    (
        "a social security number",
        re.compile(
            r"\b(?:social\s+security\s+(?:number|no\.?)|ssn)\s*(?:is|was|=|:)?\s*"
            r"\d{3}[- ]?\d{2}[- ]?\d{4}\b",
            re.I,
        ),
    ),
    (
        "a credential",
        re.compile(
            r"\b(?:api[\s_-]?key|access[\s_-]?token|auth[\s_-]?token|secret[\s_-]?key|"
            r"client[\s_-]?secret)\s*(?:is|was|=|:)\s*\S{8,}",
            re.I,
        ),
    ),
)
