"""``manage.py memory_eval``: LoCoMo retrieval recall or golden-set generation quality.

Thin: the evaluation lives in :mod:`memory_app.evaluation`, which says what it writes to the
database (users of its own, deleted at the end unless ``--keep``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from memory_app.evaluation import golden_evaluate, locomo_evaluate


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
        parser.add_argument("--keep", action="store_true", help="keep the run's users")
        parser.add_argument("--json", action="store_true", help="print JSON (else key: value)")

    def handle(self, *args, dataset: str, path: Path, **options) -> None:
        progress = _progress if options["verbosity"] > 0 else (lambda _message: None)
        if dataset == "locomo":
            result = locomo_evaluate(
                path=path,
                ks=options["k"],
                conversations_limit=options["conversations"],
                keep=options["keep"],
                progress=progress,
            )
        else:
            result = golden_evaluate(path=path, keep=options["keep"], progress=progress)
        if options["verbosity"] > 0:
            sys.stderr.write("\n")
        if options["json"]:
            self.stdout.write(json.dumps(result, indent=2))
        else:
            for key, value in result.items():
                self.stdout.write(f"{key}: {json.dumps(value)}")
