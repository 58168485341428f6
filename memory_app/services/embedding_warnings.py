"""The embedding warning staff see once: kept open per kind while the embedding model fails
or answers the wrong shape, closed when staff acknowledge it or embeddings work again."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from memory_app.models import EmbeddingWarning

ERROR_CHARS = 1000


def embedding_warning_record(*, kind: str, embedder: str, error: str) -> EmbeddingWarning:
    """Count one more failure of ``kind`` (``EmbeddingWarning.Kind``) on the open warning of
    that kind, opening one if none is: however many turns fail, staff are told once. Its own
    short transaction, so that a caller's failure to come does not take the warning along,
    and a race of two first failures ends in one warning."""
    error = error[:ERROR_CHARS]
    now = timezone.now()
    for _attempt in range(2):
        with transaction.atomic():
            counted = EmbeddingWarning.objects.filter(kind=kind, closed_at__isnull=True).update(
                occurrences=F("occurrences") + 1, last_at=now, error=error, embedder=embedder
            )
            if counted:
                return EmbeddingWarning.objects.get(kind=kind, closed_at__isnull=True)
        try:
            with transaction.atomic():
                return EmbeddingWarning.objects.create(
                    kind=kind, embedder=embedder, error=error, last_at=now
                )
        except IntegrityError:
            continue  # another process opened it meanwhile: count on it
    raise RuntimeError("the open embedding warning could be neither counted nor opened")


def embedding_warnings_resolve(*, embedder: str) -> int:
    """Close the open warning that embeddings failed, now that ``embedder`` embedded again (a
    background task succeeded); a wrong shape stays until acknowledged, since the vectors
    made meanwhile may still be of the other shape. Returns how many were closed."""
    return EmbeddingWarning.objects.filter(
        kind=EmbeddingWarning.Kind.FAILED, embedder=embedder, closed_at__isnull=True
    ).update(closed_at=timezone.now(), closed_how="Embeddings worked again")


def embedding_warnings_acknowledge(
    *, warnings: Sequence[EmbeddingWarning], actor: AbstractBaseUser
) -> int:
    """Close ``warnings`` as acknowledged by ``actor``: the console stops showing them; a new
    failure opens a new one. Returns how many were open."""
    return EmbeddingWarning.objects.filter(
        pk__in=[warning.pk for warning in warnings], closed_at__isnull=True
    ).update(closed_at=timezone.now(), closed_how=f"Acknowledged by {actor.get_username()}")
