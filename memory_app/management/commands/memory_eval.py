"""``manage.py memory_eval``: LoCoMo retrieval recall or golden-set generation quality, and
with ``--answer-model`` / ``--judge-model`` LoCoMo answer accuracy judged by a model (J).

Thin: the evaluations live in :mod:`memory_app.evaluation`, :mod:`memory_app.golden_eval` and
:mod:`memory_app.answer_eval`, which say what they write to the database (users of their own,
deleted at the end unless ``--keep``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import override_settings

from memory_app.answer_eval import answer_models_available, locomo_answers_evaluate
from memory_app.evaluation import SOURCES, locomo_evaluate
from memory_app.golden_eval import golden_evaluate

NO_KEY = (
    "--answer-model and --judge-model call the models of LLM_PROVIDER: for Gemini set "
    "GEMINI_API_KEY (or GOOGLE_API_KEY, or GOOGLE_GENAI_USE_VERTEXAI with "
    "GOOGLE_CLOUD_PROJECT), for an OpenAI-compatible server LLM_PROVIDER=openai and "
    "OPENAI_BASE_URL first."
)


def _progress(message: str) -> None:
    sys.stderr.write(f"\r{message[:78]:<78}")
    sys.stderr.flush()


class Command(BaseCommand):
    help = (
        "Evaluate long-term memory through the real pipeline: 'locomo PATH' (evidence "
        "recall@K of search) or 'golden PATH' (precision/recall/F1 of generated memories). "
        "Writes to the configured database under its own app name and users, deleted at the "
        "end unless --keep."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", choices=["locomo", "golden"])
        parser.add_argument("path", type=Path)
        parser.add_argument("--k", type=int, nargs="+", default=[5, 10], help="locomo: the K's")
        parser.add_argument(
            "--conversations", type=int, default=None, help="locomo: only the first N"
        )
        parser.add_argument(
            "--sources",
            nargs="+",
            choices=SOURCES,
            default=list(SOURCES),
            help="locomo: what recall is measured over: both (memories and past conversations, "
            "what the agent reaches; the default figure), memories alone, past conversations "
            "alone (with no memories asked for, none are generated)",
        )
        parser.add_argument("--keep", action="store_true", help="keep the run's users")
        parser.add_argument(
            "--answer-model",
            help="locomo: answer each question with this model of LLM_PROVIDER and report J",
        )
        parser.add_argument(
            "--judge-model", help="locomo: the model (of LLM_PROVIDER) that judges answers"
        )
        parser.add_argument(
            "--full-context",
            action="store_true",
            help="locomo answers: from the whole conversation instead of retrieved memories",
        )
        parser.add_argument(
            "--answer-k", type=int, default=10, help="locomo answers: memories per question"
        )
        parser.add_argument(
            "--memory-model",
            help="model of memory generation for the run (e.g. 'offline' for the offline "
            "rules while a model answers); default: MEMORY_EXTRACTION_MODEL",
        )
        parser.add_argument("--json", action="store_true", help="print JSON (else key: value)")

    def handle(self, *args, dataset: str, path: Path, **options) -> None:
        progress = _progress if options["verbosity"] > 0 else (lambda _message: None)
        answering = options["answer_model"] or options["judge_model"]
        if answering and not (options["answer_model"] and options["judge_model"]):
            raise CommandError("--answer-model and --judge-model go together.")
        if answering and dataset != "locomo":
            raise CommandError("--answer-model and --judge-model apply to 'locomo' only.")
        if answering and not answer_models_available():
            raise CommandError(NO_KEY, returncode=2)
        overrides = {}
        if options["memory_model"]:
            overrides["MEMORY_EXTRACTION_MODEL"] = options["memory_model"]
        with override_settings(**overrides):
            result = self._evaluate(dataset=dataset, path=path, progress=progress, **options)
        if options["verbosity"] > 0:
            sys.stderr.write("\n")
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2))
        else:
            for key, value in result.items():
                self.stdout.write(f"{key}: {json.dumps(value)}")

    def _evaluate(self, *, dataset: str, path: Path, progress, **options) -> dict:
        if options["answer_model"]:
            return locomo_answers_evaluate(
                path=path,
                answer_model=options["answer_model"],
                judge_model=options["judge_model"],
                full_context=options["full_context"],
                k=options["answer_k"],
                conversations_limit=options["conversations"],
                keep=options["keep"],
                progress=progress,
            )
        if dataset == "locomo":
            return locomo_evaluate(
                path=path,
                ks=options["k"],
                conversations_limit=options["conversations"],
                keep=options["keep"],
                sources=options["sources"],
                progress=progress,
            )
        return golden_evaluate(path=path, keep=options["keep"], progress=progress)
