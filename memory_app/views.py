"""The Memory page: what the assistant remembers about the signed-in user, why, and the
controls to correct or delete it. Plain forms; every write goes through the services."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from memory_app import selectors, services
from memory_app.models import Memory, MemoryRevision, MemoryStatus, SourceType
from memory_app.serializers import SEARCH_LIMIT, revision_actor, source_excerpt, source_url
from memory_app.topics import topics_for_app

PAGE_SIZE = 100
STATUS_NOTES = {
    MemoryStatus.QUARANTINED: "Held for review: not used in replies.",
    MemoryStatus.INVALIDATED: "No longer used: replaced or outdated.",
    MemoryStatus.REJECTED: "Rejected in review: not used in replies.",
}


@dataclass
class SourceItem:
    excerpt: str
    url: str
    author: str


@dataclass
class RevisionItem:
    revision: MemoryRevision
    actor: str
    old_text: str
    new_text: str


@dataclass
class MemoryItem:
    memory: Memory
    topic_label: str
    source_label: str
    status_note: str
    score: float | None = None
    sources: list[SourceItem] = field(default_factory=list)
    revisions: list[RevisionItem] = field(default_factory=list)


def _text_of(snapshot) -> str:
    return snapshot.get("text", "") if isinstance(snapshot, dict) else ""


def _item(
    memory: Memory, *, user_pk: int, labels: dict[str, str], score: float | None = None
) -> MemoryItem:
    return MemoryItem(
        memory=memory,
        topic_label=_topic_label(labels, memory.topic),
        source_label=SourceType(memory.source_type).label,
        status_note=STATUS_NOTES.get(memory.status, ""),
        score=score,
        sources=[
            SourceItem(excerpt=source_excerpt(s), url=source_url(s), author=s.event.author)
            for s in memory.sources.all()
        ],
        revisions=[
            RevisionItem(
                revision=revision,
                actor=revision_actor(revision, user_pk=user_pk),
                old_text=_text_of(revision.before),
                new_text=_text_of(revision.after),
            )
            for revision in memory.revisions.all()
        ],
    )


def _topic_label(labels: dict[str, str], key: str) -> str:
    return labels.get(key) or (key.replace("_", " ").capitalize() if key else "Other")


@login_required
def memory_page(request: HttpRequest) -> HttpResponse:
    """The user's memories grouped by topic, or the best matches of a search (``q``)."""
    app_name = settings.DEFAULT_APP_NAME
    user_pk = request.user.pk
    query = request.GET.get("q", "").strip()[:1000]
    labels = {topic.key: topic.label for topic in topics_for_app(app_name=app_name)}
    results: list[MemoryItem] = []
    groups: list[tuple[str, list[MemoryItem]]] = []
    page = None
    if query:
        results = [
            _item(memory, user_pk=user_pk, labels=labels, score=memory.score)
            for memory in selectors.user_memories_matching(
                app_name=app_name, user_pk=user_pk, query=query, limit=SEARCH_LIMIT
            )
        ]
    else:
        paginator = Paginator(
            selectors.user_memories(app_name=app_name, user_pk=user_pk), PAGE_SIZE
        )
        page = paginator.get_page(request.GET.get("page"))
        items = [_item(m, user_pk=user_pk, labels=labels) for m in page.object_list]
        groups = [
            (label, list(members))
            for label, members in groupby(items, key=lambda item: item.topic_label)
        ]
    context = {
        "query": query,
        "results": results,
        "groups": groups,
        "page": page,
        "memory_settings": selectors.memory_settings_get(user_pk=user_pk),
        "total": selectors.user_memories(app_name=app_name, user_pk=user_pk).count(),
    }
    return render(request, "memory/memory.html", context)


def _back(request: HttpRequest) -> HttpResponse:
    """Back to the Memory page, keeping the search the form was sent from."""
    query = request.POST.get("q", "").strip()
    url = reverse("memory")
    return redirect(f"{url}?{urlencode({'q': query})}" if query else url)


@login_required
@require_POST
def memory_delete(request: HttpRequest, memory_id: str) -> HttpResponse:
    if not services.memory_delete(
        app_name=settings.DEFAULT_APP_NAME, user_pk=request.user.pk, memory_id=memory_id
    ):
        raise Http404("No such memory.")
    messages.success(request, "Memory deleted. It will not be used again.")
    return _back(request)


@login_required
@require_POST
def memory_correct(request: HttpRequest, memory_id: str) -> HttpResponse:
    try:
        memory = services.memory_correct(
            app_name=settings.DEFAULT_APP_NAME,
            user_pk=request.user.pk,
            memory_id=memory_id,
            text=request.POST.get("text", ""),
        )
    except services.MemoryCorrectionError as error:
        if (
            selectors.memory_get(
                app_name=settings.DEFAULT_APP_NAME, user_pk=request.user.pk, memory_id=memory_id
            )
            is None
        ):
            raise Http404("No such memory.") from None
        messages.error(request, f"Not corrected. {error}")
        return _back(request)
    if memory is None:
        raise Http404("No such memory.")
    messages.success(request, "Memory corrected. The old text is kept in its history.")
    return _back(request)


@login_required
@require_http_methods(["GET", "POST"])
def memories_delete_all(request: HttpRequest) -> HttpResponse:
    """A confirmation page; deleting needs its form, with the box ticked."""
    app_name = settings.DEFAULT_APP_NAME
    count = selectors.user_memories(app_name=app_name, user_pk=request.user.pk).count()
    error = ""
    if request.method == "POST":
        if request.POST.get("confirm") == "yes":
            deleted = services.memories_delete_all(app_name=app_name, user_pk=request.user.pk)
            messages.success(request, f"Deleted {deleted} memories. None will be used again.")
            return redirect("memory")
        error = "Tick the box to confirm."
    return render(
        request,
        "memory/delete_all.html",
        {"count": count, "error": error},
        status=400 if error else 200,
    )
