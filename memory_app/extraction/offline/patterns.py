"""The rule tables of the offline extraction: the patterns and word lists of rules 1-3 (see
:mod:`memory_app.extraction`)."""

from __future__ import annotations

import re

REMEMBER = re.compile(
    r"^(?:(?:can|could|would)\s+you\s+)?(?:please\s+)?"
    r"(?:remember|don't\s+forget|do\s+not\s+forget|keep\s+in\s+mind)(?:\s+that\b|\s*:)?\s+"
    r"(?!(?:to|when|how|what|why|where|who|if|me|this|these|those|it|them|that)\b)(?P<fact>.+)$",
    re.I,
)
CORRECTION = re.compile(
    r"^(?:(?:actually|correction|sorry|oops|wait)\b[,:!]?\s+(?:i\s+meant,?\s+)?"
    r"|no[,!.]\s+(?=(?:i|my)\b)|i\s+meant,?\s+)",
    re.I,
)
NOT_BUT_COPULA = re.compile(
    r"\b(?P<verb>is|am|are|was)\s+not\s+(?P<old>[^,;]+?)\s*,?\s+but\s+(?P<new>[^,;]+)$", re.I
)
NOT_BUT_PREPOSITION = re.compile(
    r"\bnot\s+(?P<prep>in|at|as|to|from|for|with|on)\s+(?P<old>[^,;]+?)\s*,?\s+but\s+"
    r"(?:(?P=prep)\s+)?(?P<new>[^,;]+)$",
    re.I,
)
MY = re.compile(
    r"^my\s+(?P<thing>[a-z][\w' -]{0,40}?)\s+(?P<verb>is|are|was|were|has\s+been|have\s+been)"
    r"(?P<neg>\s+not|\s+no\s+longer)?\s+(?P<value>.+)$",
    re.I,
)
MY_CONTRACTED = re.compile(
    r"^my\s+(?P<thing>[a-z][\w -]{0,40}?)'s(?P<neg>\s+not|\s+no\s+longer)?\s+(?P<value>.+)$",
    re.I,
)
MY_NOT_FACTS = frozenset(
    [
        "question",
        "point",
        "problem",
        "issue",
        "guess",
        "bad",
        "turn",
        "pleasure",
        "mistake",
        "concern",
        "request",
        "answer",
        "apologies",
        "bet",
        "hope",
        "idea",
        "worry",
    ]
)
# The people and animals in the user's life: "my sister Ana lives in Braga" is a fact about the
# user's sister, "my code throws an error" is not a fact about the user.
_RELATIONS = (
    r"sister|brother|sibling|mother|mom|mum|father|dad|parent|wife|husband|partner|spouse|"
    r"fianc[ée]e?|boyfriend|girlfriend|son|daughter|kid|child|children|baby|twin|friend|"
    r"boss|manager|colleague|coworker|co-worker|roommate|flatmate|neighbou?r|grandmother|"
    r"grandma|grandfather|grandpa|grandparent|aunt|uncle|cousin|niece|nephew|family|cat|dog|"
    r"puppy|kitten|pet|horse|parrot|rabbit|teacher|doctor|in-laws?|mother-in-law|father-in-law"
)
MY_RELATION = re.compile(
    r"^[Mm]y\s+(?P<thing>(?:(?:best|little|older|younger|big|elder|twin|new|oldest|youngest)\s+)?"
    rf"(?:{_RELATIONS})s?(?:\s+[A-Z][\w'-]+(?:\s+and\s+[A-Z][\w'-]+)?)?)\s+"
    r"(?P<rest>(?:(?:just|also|still|recently|now|finally|really|usually|always|never|only)\s+)*"
    r"(?P<neg>(?:does|do|did)\s+not\s+|no\s+longer\s+)?(?P<verb>[a-z]+)\b.*)$",
)
# The relations "he" and "she" can stand for (the others, "partner", "friend", "dog", either).
RELATIONS_MALE = frozenset(
    [
        "brother",
        "father",
        "dad",
        "husband",
        "boyfriend",
        "son",
        "grandfather",
        "grandpa",
        "uncle",
        "nephew",
    ]
)
RELATIONS_FEMALE = frozenset(
    [
        "sister",
        "mother",
        "mom",
        "mum",
        "wife",
        "girlfriend",
        "daughter",
        "grandmother",
        "grandma",
        "aunt",
        "niece",
    ]
)
# "my dad", "my partner, Rui", "my best friend Ana": someone of the user's life a later "he",
# "she" or the name stands for; "a dog named Rex", "my cat called Miso".
RELATION_MENTION = re.compile(
    r"\b[Mm]y\s+(?P<relation>(?:(?:best|little|older|younger|big|elder|oldest|youngest)\s+)?"
    rf"(?:{_RELATIONS}))\b(?!['-])(?:,?\s+(?P<name>[A-Z][\w-]+)\b(?!'))?"
)
RELATION_NAMED = re.compile(
    rf"\b(?:[Aa]n?|[Mm]y)\s+(?P<relation>{_RELATIONS})\s+(?:named|called)\s+"
    r"(?P<name>[A-Z][\w-]+)\b"
)
# Verbs that cannot follow "my sister" in a statement about her ("my sister and I", "my dog's").
RELATION_NOT_VERBS = frozenset(["and", "or", "who", "which", "that", "if", "to", "for"])
# "I'm planning to ...", "I plan to ...", "I'm training for ...": plans and projects of the
# user's own life, kept as key conversation details.
PLAN = re.compile(
    r"^i\s+(?:am\s+)?(?P<verb>planning|plan|hoping|hope|training|learning|preparing|saving|"
    r"going|flying|travelling|traveling|heading)\s+(?P<rest>.+)$",
    re.I,
)
PLAN_GOING = re.compile(
    r"^to\s+(?:visit|travel|move|start|run|fly|go\s+to|spend|take|get\s+married|retire|"
    r"[A-Z])",
)
I_AM = re.compile(r"^i\s+am\s+(?P<neg>not\s+|no\s+longer\s+)?(?P<rest>.+)$", re.I)
I_AM_VERBS = {"living": "lives", "working": "works", "studying": "studies"}
PASSING_STATES = frozenset(
    [
        "sorry",
        "sure",
        "fine",
        "good",
        "ok",
        "okay",
        "tired",
        "ready",
        "back",
        "done",
        "confused",
        "curious",
        "wondering",
        "afraid",
        "just",
        "still",
        "here",
        "glad",
        "happy",
        "sad",
        "bored",
        "busy",
        "hungry",
        "thirsty",
        "late",
        "new",
        "unsure",
        "not",
        "able",
        "going",
        "trying",
        "looking",
        "thinking",
        "asking",
    ]
)
I_VERB = re.compile(
    r"^i\s+(?P<adverbs>(?:(?:also|still|currently|now|really|actually|usually|mostly|"
    r"absolutely|totally|just|generally|always|often|sometimes)\s+)*)"
    r"(?P<neg>(?:do\s+not|no\s+longer|never)\s+(?:really\s+)?)?"
    r"(?P<verb>[a-z]+)\b(?P<rest>.*)$",
    re.I,
)
PREFERENCE_VERBS = frozenset(["like", "love", "prefer", "hate", "dislike", "enjoy", "adore"])
PERSONAL_VERBS = frozenset(
    [
        "live",
        "work",
        "study",
        "teach",
        "own",
        "have",
        "speak",
        "use",
        "play",
        "drive",
        "eat",
        "drink",
        "cook",
        "moved",
        "grew",
        "was",
        "run",
        "swim",
        "cycle",
        "ride",
        "walk",
        "go",
        "visit",
        "read",
        "wake",
        "travel",
        "commute",
        "book",
        "order",
        "wear",
        "take",
    ]
)
# Things that happened in the user's life, said in the past, kept as said: "I quit smoking in
# January", "I joined a book club", "I used to work at a bank".
LIFE_EVENTS = frozenset(
    [
        "quit",
        "sold",
        "joined",
        "started",
        "accepted",
        "bought",
        "adopted",
        "stopped",
        "booked",
        "finished",
        "graduated",
        "married",
        "retired",
        "used",
        "turned",
        "settled",
        "decided",
        "chose",
        "picked",
        "left",
        "gave",
        "went",
        "got",
        "became",
    ]
)
# Life events that say something only with the words after them: "I gave up coffee", "I went
# back to Nairobi", "I got a new job at ...", "I left Spotify" (not "I left early").
LIFE_EVENT_PHRASES = {
    "used": r"^\s+to\s",
    "gave": r"^\s+up\b",
    "went": r"^\s+back\s+(?:to|home)\b",
    "got": r"^\s+(?:a\s+(?:new\s+)?job|married|engaged|divorced|back\s+together|a\s+(?:new\s+)?"
    r"(?:girlfriend|boyfriend|partner|dog|cat|puppy|kitten))\b",
    "left": r"^\s+(?:my\s+|the\s+|(?-i:[A-Z]))",
    "became": r"^\s+(?:a|an)\s",
}
# Decisions of the user's own life: "I settled on the 3-day itinerary", "I decided to ...".
DECISIONS = frozenset(["settled", "decided", "chose", "picked"])
# "I can read hiragana now": a skill of the user's, not "I can't log in" or "I can help".
CAN_SKILL = re.compile(
    r"^i\s+can\s+(?:now\s+|also\s+|already\s+)?(?P<skill>(?:read|speak|write|play|cook|swim|"
    r"drive|code|program|sing|dance|ski|surf|knit|sew|paint|draw|understand)\b.+)$",
    re.I,
)
AGE_TURNED = re.compile(r"^\s+(?P<age>\d{1,3})\b")
HAVE_BEEN = re.compile(
    r"^i\s+have\s+been\s+(?P<rest>(?!\w+ing\b).+|(?:living|working|studying)\b.+)$", re.I
)
FAVOURITE_NAMED = re.compile(
    r"^(?:i\s+(?:think|guess|reckon|would\s+say)\s+)?(?P<value>(?-i:[A-Z])[^,;]{0,40}?)\s+is\s+"
    r"(?:now\s+|still\s+)?my\s+(?P<what>(?:new\s+)?favou?rite\s+[\w' -]{1,30}?)"
    r"(?:\s+(?P<when>now|these\s+days|at\s+the\s+moment))?$",
    re.I,
)
# "Mia and I broke up", "Tom and I got married": the user and someone named, together.
NAME_AND_I = re.compile(r"^(?P<name>(?-i:[A-Z][\w'-]+))\s+and\s+I\s+(?P<rest>[a-z].+)$", re.I)
# "I am back at Google", "I am back to vegetarian": a return, not "I am back".
BACK_TO = re.compile(r"^back\s+(?:to|at|on|in|with)\s", re.I)
CANNOT_LIKE = re.compile(
    r"^i\s+(?:can't|cannot|can\s+not)\s+(?:stand|bear|get\s+into)\s+(?P<thing>.+)$", re.I
)
ANSWERS_PREFERRED = re.compile(
    r"^(?:please\s+)?(?:keep|make)\s+(?:your\s+|the\s+)?(?:answers|replies|responses)\s+"
    r"(?P<how>short|brief|concise|long|detailed|simple)\b",
    re.I,
)
# "I'm doing a master's", "I'm writing my thesis": an activity of the user's own, not "I'm
# looking for ...", "I'm trying to ..." (a request coming).
ACTIVITY_OBJECT = re.compile(r"^(?:a|an|my|the|his|her|our)\b", re.I)
PREFERENCE_NOT_OBJECTS = re.compile(
    r"^\s*(?:it|that|this|them|those|these|you|your|how|what|when)\b", re.I
)
HAVE_NOT_FACTS = re.compile(
    r"^\s*(?:to|a\s+question|a\s+quick\s+question|no\s+idea|been|got|a\s+problem|an\s+idea)\b",
    re.I,
)
PAST_PHRASES = {"moved": r"^\s+to\b", "grew": r"^\s+up\b", "was": r"^\s+born\b"}
MOVED = re.compile(
    r"^i\s+(?:have\s+)?(?:(?:just|recently|finally|also|actually)\s+)*(?:moved|relocated)\s+"
    r"(?:back\s+)?"
    r"(?:from\s+(?P<origin>[^,;]+?)\s+)?to\s+(?P<rest>.+)$",
    re.I,
)
_MONTHS_SEASONS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "spring|summer|autumn|fall|winter"
)
PLACE_END = re.compile(
    r",|\s+(?:last|this|next|for|because|with|after|when|since|so|as|about|recently|ago|and|"
    r"but|to|from|a\s+(?:year|month|week|while|few))\b"
    rf"|\s+in\s+(?:\d|the\s+(?:{_MONTHS_SEASONS})\b|(?:{_MONTHS_SEASONS})\b)",
    re.I,
)
SWITCHED = re.compile(
    r"^i\s+(?:have\s+)?(?:(?:just|recently|finally|also|now)\s+)*(?:switched|changed)"
    r"(?:\s+over)?\s+(?:from\s+(?P<old>[^,;]+?)\s+)?to\s+(?P<new>[^,;]+)(?:[,;].*)?$",
    re.I,
)
# A statement bound to a time ("I'm in Berlin this week") stops being true after it: days from
# when it was said, first match wins.
TIME_BOUND: tuple[tuple[re.Pattern, int], ...] = tuple(
    (re.compile(pattern, re.I), days)
    for pattern, days in (
        (r"\b(?:today|tonight|this\s+(?:morning|afternoon|evening))\b", 1),
        (r"\btomorrow\b", 2),
        (r"\bthis\s+weekend\b", 4),
        (r"\b(?:this|for\s+the)\s+week\b", 7),
        (r"\bnext\s+week\b", 14),
        (r"\bthis\s+month\b", 31),
    )
)
# Small talk: a sentence made only of these words greets, thanks, asks after the other or takes
# leave, and says nothing worth remembering ("Hi there!", "Good morning! How's your day
# going?", "I'm doing great, thanks for asking!", "Bye, talk to you later!"). It may also name
# someone ("Hey Caroline!", "Happy Friday!") when it holds one of SMALL_TALK_MARKERS.
_SMALL_TALK_TEXT = """
    hi hello hey heya hiya howdy yo greetings welcome morning afternoon evening night good
    day days week weekend today tonight tomorrow there all everyone everybody folks guys dear
    how how's what's whats up new anything everything is it it's its are you you're ya your
    yourself doing going been being have has things thing life treating lately so far
    well fine great ok okay alright not bad pretty too very really super awesome and same here
    i i'm am thanks thank thx cheers much a lot for asking appreciate appreciated bye goodbye
    see soon later talk catch take care nice lovely wonderful happy glad to meet hear from
    long time no while hope hoping chatting chat pleasure that that's of kind sweet just saying
    can't cannot complain the again likewise back me my one then until next hearing aww oh
    nope yep yeah wow with sleep tight dreams safe travels enjoy u ur
"""
SMALL_TALK_WORDS = frozenset(_SMALL_TALK_TEXT.split())
_SMALL_TALK_MARKER_TEXT = """
    hi hello hey heya hiya howdy yo greetings welcome morning afternoon evening night thanks
    thank thx cheers bye goodbye meet care how how's what's whats nice lovely glad chatting happy
"""
SMALL_TALK_MARKERS = frozenset(_SMALL_TALK_MARKER_TEXT.split())
LASTING = re.compile(r"\b(?:no\s+longer|anymore|any\s+more)\b", re.I)
