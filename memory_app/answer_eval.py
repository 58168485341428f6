"""Answer accuracy on LoCoMo judged by a model ("J"), the measure the field compares memory
systems by (the Mem0 paper's LLM-as-a-judge protocol: Mem0 66.9, Zep 66.0, OpenAI memory 52.9,
the whole conversation in context 72.9).

For each question of categories 1-4, the answer model answers from the memories
:func:`~memory_app.selectors.memory_search` retrieves for it (each shown with the date it was
said and who said it), or, with ``full_context``, from the whole conversation; the judge model
then labels the answer CORRECT or WRONG against the gold answer, generously (the same thing in
other words, the same date in another format, counts as correct). J is the share of CORRECT
answers, over all questions and per category; each answer keeps its token counts.

The memories come from the real pipeline (:func:`memory_app.evaluation.locomo_ingest`, with the
configured extraction: Gemini, or the offline rules with ``MEMORY_EXTRACTION_MODEL=offline``).
Both models are models of ``LLM_PROVIDER`` through its client (Gemini, or an OpenAI-compatible
server); :func:`answer_models_available` says whether it is configured.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from google.genai import types

from core.llm import (
    LlmRequest,
    RetryPolicy,
    generate_with_retries,
    provider_configured,
    provider_model,
    provider_name,
)
from memory_app import selectors
from memory_app.embedding import embedder_get
from memory_app.evaluation import (
    CATEGORIES,
    LOCOMO_APP,
    LocomoConversation,
    Progress,
    locomo_ingest,
    locomo_load,
    user_create,
)
from memory_app.extraction import memory_model_configured
from memory_app.models import Memory, MemoryStatus
from sessions_app.models import EventRecord

ANSWER_INSTRUCTION = """You answer a question about a long conversation between {speakers}.
Use only the {material} below. Each line carries the date it was said on; resolve relative
dates ("last week", "next month") against that date. Answer with a short phrase, a few words,
without explanation. When the {material} do not hold the answer, give your best guess."""

JUDGE_INSTRUCTION = """You grade an answer to a question about a conversation against the gold
answer. Be generous: the answer is CORRECT when it refers to the same thing as the gold answer,
even if it is longer or worded differently, and for a date or a time when it names the same
date or period in any format. Otherwise it is WRONG.
Reply with a JSON object and nothing else: {"label": "CORRECT"} or {"label": "WRONG"}."""

_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


def answer_models_available() -> bool:
    """Whether ``LLM_PROVIDER`` has its access configured, which the answer and judge models
    need."""
    return provider_configured()


@dataclass(frozen=True)
class _Reply:
    text: str
    prompt_tokens: int
    output_tokens: int


def _generate(*, model_name: str, system_instruction: str, prompt: str) -> _Reply:
    """One call of ``model_name``, retried on transient errors as a chat turn's is."""

    async def run() -> _Reply:
        model = provider_model(model=model_name)
        request = LlmRequest(
            model=model_name,
            system_instruction=system_instruction,
            contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
        )
        policy = RetryPolicy(
            attempts=settings.LLM_RETRY_ATTEMPTS, base_delay=settings.LLM_RETRY_BASE_DELAY_SECONDS
        )
        text, usage = [], None
        try:
            async for chunk in generate_with_retries(model, request, policy):
                text.append(chunk.text)
                usage = chunk.usage_metadata or usage
        finally:
            await model.aclose()
        return _Reply(
            text="".join(text).strip(),
            prompt_tokens=(usage.prompt_token_count or 0) if usage else 0,
            output_tokens=(usage.candidates_token_count or 0) if usage else 0,
        )

    return async_to_sync(run)()


def judge_label(text: str) -> str:
    """CORRECT or WRONG from the judge's reply (its JSON, or the word itself); WRONG when
    neither is found."""
    try:
        label = json.loads(text).get("label")
    except (ValueError, AttributeError):
        label = None
    if label not in ("CORRECT", "WRONG"):
        found = _LABEL.search(text.upper())
        label = found.group(1) if found else "WRONG"
    return label


def _speakers(path: Path) -> dict[str, tuple[str, str]]:
    return {
        sample["sample_id"]: (
            sample["conversation"]["speaker_a"],
            sample["conversation"]["speaker_b"],
        )
        for sample in json.loads(Path(path).read_text())
    }


def _transcript(conversation: LocomoConversation) -> str:
    lines = []
    for number, session in enumerate(conversation.sessions, start=1):
        lines.append(f"Session {number} ({session.date:%d %B %Y}):")
        lines.extend(f"{turn.speaker}: {turn.text}" for turn in session.turns)
    return "\n".join(lines)


def _memory_lines(*, memories: list, said: dict[str, tuple[str, str]]) -> str:
    """One line per memory, opening with the date and the speaker of its first source (a
    memory "The user ..." of a two-person conversation says nothing of who "the user" is)."""
    lines = []
    for memory in memories:
        where = next((said[s.event_id] for s in memory.sources if s.event_id in said), None)
        if memory.text.startswith("[") or where is None:
            lines.append(f"- {memory.text}")
        else:
            lines.append(f"- [{where[0]}] ({where[1]}) {memory.text}")
    return "\n".join(lines) or "(no memories)"


def _said_by_event(user_pk: int) -> dict[str, tuple[str, str]]:
    """Each of the user's events: (date, speaker), from the transcript's metadata."""
    rows = EventRecord.objects.filter(session__user_id=user_pk).values_list(
        "event_id", "timestamp", "custom_metadata"
    )
    return {
        event_id: (
            f"{datetime.fromtimestamp(timestamp, tz=UTC):%d %B %Y}",
            str((meta or {}).get("speaker", "")),
        )
        for event_id, timestamp, meta in rows
    }


def locomo_answers_evaluate(
    *,
    path: Path,
    answer_model: str,
    judge_model: str,
    full_context: bool = False,
    k: int = 10,
    app_name: str = LOCOMO_APP,
    conversations_limit: int | None = None,
    keep: bool = False,
    progress: Progress = lambda _message: None,
) -> dict[str, Any]:
    """J over LoCoMo's questions of categories 1-4 (see the module docstring).

    Returns ``j_score``, ``j_by_category``, token means and totals, and every answer with its
    question, gold answer, label and token counts. Memories are made for users of the run,
    deleted at the end unless ``keep``; with ``full_context`` nothing is stored.
    """
    conversations = locomo_load(path=path)[:conversations_limit]
    speakers = _speakers(path)
    answers: list[dict[str, Any]] = []
    users = []
    memories = 0
    total = sum(len(c.questions) for c in conversations)
    try:
        for conversation in conversations:
            material = "conversation" if full_context else "memories"
            instruction = ANSWER_INSTRUCTION.format(
                speakers=" and ".join(speakers.get(conversation.sample_id, ("two people",))),
                material="lines of the conversation" if full_context else "memories",
            )
            context = _transcript(conversation) if full_context else ""
            said: dict[str, tuple[str, str]] = {}
            user = None
            if not full_context:
                user = user_create(app_name=app_name, label=conversation.sample_id)
                users.append(user)
                locomo_ingest(
                    app_name=app_name, user_pk=user.pk, conversation=conversation, progress=progress
                )
                said = _said_by_event(user.pk)
                memories += Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE).count()
            for question in conversation.questions:
                progress(f"answers {len(answers) + 1}/{total}")
                if user is not None:
                    found = selectors.memory_search(
                        app_name=app_name, user_pk=user.pk, query=question.question, limit=k
                    )
                    context = _memory_lines(memories=found, said=said)
                reply = _generate(
                    model_name=answer_model,
                    system_instruction=instruction,
                    prompt=f"{material.capitalize()}:\n{context}\n\nQuestion: {question.question}",
                )
                verdict = _generate(
                    model_name=judge_model,
                    system_instruction=JUDGE_INSTRUCTION,
                    prompt=(
                        f"Question: {question.question}\nGold answer: {question.answer}\n"
                        f"Answer: {reply.text}"
                    ),
                )
                answers.append(
                    {
                        "conversation": conversation.sample_id,
                        "question": question.question,
                        "category": CATEGORIES[question.category],
                        "gold": question.answer,
                        "answer": reply.text,
                        "label": judge_label(verdict.text),
                        "prompt_tokens": reply.prompt_tokens,
                        "output_tokens": reply.output_tokens,
                        "judge_tokens": verdict.prompt_tokens + verdict.output_tokens,
                    }
                )
    finally:
        if not keep:
            for user in users:
                user.delete()
    return _answers_summary(
        answers=answers,
        conversations=len(conversations),
        answer_model=answer_model,
        judge_model=judge_model,
        full_context=full_context,
        k=k,
        memories=memories,
    )


def _j(labels: Sequence[str]) -> float:
    return round(sum(label == "CORRECT" for label in labels) / len(labels), 4) if labels else 0.0


def _answers_summary(*, answers: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    by_category: dict[str, list[str]] = {}
    for answer in answers:
        by_category.setdefault(answer["category"], []).append(answer["label"])

    def mean(key: str) -> float:
        return round(statistics.fmean(a[key] for a in answers), 1) if answers else 0.0

    return {
        "conversations": run["conversations"],
        "questions": len(answers),
        "answer_model": run["answer_model"],
        "judge_model": run["judge_model"],
        "context": "full conversation" if run["full_context"] else f"top {run['k']} memories",
        "memories": run["memories"],
        "extraction": provider_name() if memory_model_configured() else "offline",
        "embedder": embedder_get().name,
        "j_score": _j([a["label"] for a in answers]),
        "j_by_category": {
            name: _j(by_category[name]) for name in CATEGORIES.values() if name in by_category
        },
        "tokens": {
            "answer_prompt_mean": mean("prompt_tokens"),
            "answer_output_mean": mean("output_tokens"),
            "answer_total": sum(a["prompt_tokens"] + a["output_tokens"] for a in answers),
            "judge_total": sum(a["judge_tokens"] for a in answers),
        },
        "answers": answers,
    }
