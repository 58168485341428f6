"""The offline extraction rules, as the package docstring of :mod:`memory_app.extraction`
specifies them, and the reading of a fact's subject and polarity that consolidation shares
with them.

Where it lives:

- ``rules``: the extractor, :func:`facts_from_offline_rules` (rules 1-3 sentence by
  sentence) and :func:`facts_from_tool_calls`;
- ``statements``: rule 3, the first-person statement a sentence makes;
- ``patterns``: the rules' tables, their patterns and word lists;
- ``sentences``: a message cut into sentences and each cleaned;
- ``phrasing``: first person made third person (contractions, pronouns, verb agreement);
- ``reading``: what a stored fact says (subject, polarity, switch, turn record) and a fact's
  text as memories keep it, shared with consolidation.
"""

from memory_app.extraction.offline.reading import (
    fact_is_turn_record,
    fact_negated,
    fact_subject,
    fact_switch,
    fact_text_normalise,
    fact_topic,
    user_text_normalise,
)
from memory_app.extraction.offline.rules import facts_from_offline_rules, facts_from_tool_calls

__all__ = [
    "fact_is_turn_record",
    "fact_negated",
    "fact_subject",
    "fact_switch",
    "fact_text_normalise",
    "fact_topic",
    "facts_from_offline_rules",
    "facts_from_tool_calls",
    "user_text_normalise",
]
