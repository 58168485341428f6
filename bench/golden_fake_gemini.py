"""The golden sets through Gemini's path, against the fake Gemini server (tests/fake_gemini.py):
what the pipeline keeps when the model extracts like a careless one.

    DATABASE_URL=sqlite:///build/golden-fake.sqlite3 python -m bench.golden_fake_gemini \
        memory_app/golden/conversations_memory_page.json [more sets ...]

The fake model answers each extraction request with, for every user line of the transcript it
was sent, the facts the offline rules read in it, or, when they read none and the line is not
small talk, a record of the request ("The user asked: Write a haiku about autumn leaves."): the
failure mode of issue 26. Consolidation requests get no operation (the similarity rules
decide). So the figures measure what the code around the model keeps: turns said with creation
off never reach it, and a model fact that only records a request is dropped. Prints one JSON
object per set: precision, recall, F1 and per topic, as ``memory_eval golden`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
os.environ["MEMORY_EMBEDDER"] = "none"
for _proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_proxy, None)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from google.genai import types  # noqa: E402

from memory_app.extraction.offline import facts_from_offline_rules  # noqa: E402
from memory_app.extraction.offline.sentences import (  # noqa: E402
    sentence_is_small_talk,
    sentences_split,
)
from memory_app.golden_eval import golden_evaluate  # noqa: E402
from sessions_app.events import Event  # noqa: E402
from tests.fake_gemini import FakeGemini, Reply, final_chunk, text_chunk  # noqa: E402

_LINE = re.compile(r"^\[(?P<id>[^\]]+)\] user: (?P<text>.+)$")


# What the careless model says of a user line, by its text: computed by this code, or loaded
# (--answers) so that two versions of the pipeline are measured against the same model.
_ANSWERS: dict[str, list[dict]] = {}


def _careless_facts(transcript: str) -> list[dict]:
    facts = []
    for line in transcript.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        if match["text"] not in _ANSWERS:
            _ANSWERS[match["text"]] = _careless_line(match["text"])
        facts += [{**fact, "event_ids": [match["id"]]} for fact in _ANSWERS[match["text"]]]
    return facts


def _careless_line(text: str) -> list[dict]:
    """The facts the offline rules read in ``text``, else a record of the request."""
    event = Event(
        id="line",
        invocation_id="fake",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )
    found = [
        {"text": fact.text, "topic": fact.topic, "source_type": fact.source_type,
         "kind": fact.kind, "confidence": fact.confidence, "importance": fact.importance,
         "excerpt": fact.excerpt}
        for fact in facts_from_offline_rules(events=[event])
        if not fact.text.startswith("[")
    ]  # fmt: skip
    if found or all(sentence_is_small_talk(s) for s in sentences_split(text)):
        return found
    return [
        {"text": f"The user asked: {text}", "topic": "key_conversation_details",
         "source_type": "implicit", "kind": "statement", "confidence": 0.8, "importance": 0.5,
         "excerpt": text}
    ]  # fmt: skip


class CarelessGemini(FakeGemini):
    """Answers every request itself (see the module docstring) instead of from a script."""

    def record(self, request):
        with self._lock:
            self.requests.append(request)
        schema = request.body.get("generationConfig", {}).get("responseJsonSchema", {})
        if "facts" in schema.get("properties", {}):
            transcript = "\n".join(
                part.get("text", "")
                for content in request.body.get("contents", [])
                for part in content.get("parts", [])
            )
            answer = {"facts": _careless_facts(transcript)}
        else:
            answer = {"operations": []}
        return Reply([text_chunk(json.dumps(answer)), final_chunk()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--answers", type=Path, help="the model's answers by line (JSON)")
    parser.add_argument("--save-answers", type=Path, help="write the answers used (JSON)")
    args = parser.parse_args()
    if args.answers:
        _ANSWERS.update(json.loads(args.answers.read_text()))
    call_command("migrate", verbosity=0)
    server = CarelessGemini().start()
    settings.GEMINI_API_KEY = "fake-key"
    settings.GEMINI_BASE_URL = server.url
    settings.GOOGLE_GENAI_USE_VERTEXAI = False
    settings.MEMORY_EXTRACTION_MODEL = "gemini-2.5-flash"
    try:
        for path in args.paths:
            result = golden_evaluate(path=path)
            result.pop("details")
            print(json.dumps({"set": path.name, **result}))
    finally:
        server.stop()
    if args.save_answers:
        args.save_answers.write_text(json.dumps(_ANSWERS, indent=1))


if __name__ == "__main__":
    main()
