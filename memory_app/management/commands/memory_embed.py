"""``manage.py memory_embed``: embed every memory and past user turn that has no vector of the
current embedder, with a progress bar: after a change of ``MEMORY_EMBEDDER`` (vectors of
another embedder are never compared, so until then search ranks those items by their words),
or to catch up what failed. Thin: the work is ``services.embeddings_missing_fill``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memory_app import services


class Command(BaseCommand):
    help = (
        "Embed the memories and past user turns without a vector of the configured embedder "
        "(MEMORY_EMBEDDER), in batches of MEMORY_EMBEDDING_BATCH_SIZE, with a progress bar; "
        "--check only counts them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--check", action="store_true", help="count what is missing, embed nothing"
        )

    def handle(self, *args, **options) -> None:
        embedder = services.embedder_active()
        if embedder is None:
            raise CommandError(
                "No embedder is configured (MEMORY_EMBEDDER is 'none', or 'auto' found none): "
                "search is lexical and there is nothing to embed."
            )
        missing = services.embeddings_missing_count()
        self.stdout.write(
            f"{embedder.name}: {missing.memories} memories and {missing.turns} past turns "
            "without a vector."
        )
        if options["check"] or not (missing.memories or missing.turns):
            return
        with tqdm(
            total=missing.memories + missing.turns,
            unit="text",
            file=self.stderr._out,
            disable=options["verbosity"] == 0,
        ) as bar:

            def progress(seen: services.EmbeddingReport) -> None:
                bar.update(seen.memories + seen.turns - bar.n)

            stored = services.embeddings_missing_fill(progress=progress)
        self.stdout.write(
            self.style.SUCCESS(
                f"Embedded {stored.memories} memories and {stored.turns} past turns "
                f"with {embedder.name}."
            )
        )
