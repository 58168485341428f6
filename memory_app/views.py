"""The Memory page: what the assistant remembers about the signed-in user, why, and the
controls to correct or delete it. Plain forms; every write goes through the services."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from itertools import groupby
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from memory_app import selectors, services
from memory_app.models import (
    HELD_FOR_REVIEW_NOTE,
    MEMORY_STATUS_NOTES,
    Memory,
    MemoryRevision,
    MemoryStatus,
    SourceType,
)
from memory_app.selectors import event_text
from memory_app.serializers import (
    SEARCH_LIMIT,
    MemoryFile,
    memory_file,
    revision_actor,
    source_excerpt,
    source_url,
)
from memory_app.topics import topic_label, topics_for_app
from sessions_app import services as session_services
from sessions_app.selectors import session_chat_url

PAGE_SIZE = 100
STATUS_NOTES = MEMORY_STATUS_NOTES


@dataclass
class SourceItem:
    excerpt: str
    url: str
    author: str
    file: MemoryFile | None = None


@dataclass
class RevisionItem:
    revision: MemoryRevision
    actor: str
    old_text: str
    new_text: str


@dataclass
class ChangeItem:
    """The last time the memory's text changed or it stopped being used: what it was, why,
    and the words of the turn that changed it."""

    revision: MemoryRevision
    old_text: str
    reason: str
    said: str = ""
    said_url: str = ""
    reason_is_said: bool = False  # the reason already tells what the person said, and when


@dataclass
class MemoryItem:
    memory: Memory
    topic_label: str
    source_label: str
    status_note: str
    image: MemoryFile | None = None
    score: float | None = None
    sources: list[SourceItem] = field(default_factory=list)
    revisions: list[RevisionItem] = field(default_factory=list)
    change: ChangeItem | None = None
    # A correction of this memory that was refused: what the user typed and why, shown in its
    # form so nothing they typed is lost.
    refused_text: str = ""
    refused_reason: str = ""


@dataclass(frozen=True)
class RefusedCorrection:
    memory_id: str
    text: str
    reason: str


def _text_of(snapshot) -> str:
    return snapshot.get("text", "") if isinstance(snapshot, dict) else ""


def _item(
    memory: Memory, *, user_pk: int, labels: dict[str, str], score: float | None = None
) -> MemoryItem:
    return MemoryItem(
        memory=memory,
        topic_label=topic_label(key=memory.topic, label=labels.get(memory.topic, "")),
        source_label=SourceType(memory.source_type).label,
        status_note=STATUS_NOTES.get(memory.status, ""),
        image=memory_file(memory.image) if memory.image else None,
        score=score,
        sources=[
            SourceItem(
                excerpt=source_excerpt(s),
                url=source_url(s),
                author=s.event.author,
                file=memory_file(s.artifact) if s.artifact else None,
            )
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
        change=_last_change(memory),
    )


def _last_change(memory: Memory) -> ChangeItem | None:
    changes = [
        revision
        for revision in memory.revisions.all()
        if revision.action in (MemoryRevision.Action.UPDATED, MemoryRevision.Action.INVALIDATED)
        and _text_of(revision.before)
    ]
    if not changes:
        return None
    revision = changes[-1]
    if revision.action == MemoryRevision.Action.UPDATED and _text_of(revision.before) == _text_of(
        revision.after
    ):
        return None
    change = ChangeItem(revision=revision, old_text=_text_of(revision.before), reason="")
    change.reason = revision.reason.rstrip(".")
    change.reason_is_said = revision.reason.startswith("You said ")
    event = revision.source_event
    if event is not None:
        said = " ".join(event_text(event).split())
        if not change.reason_is_said:
            change.said = said if len(said) <= 200 else said[:199] + "…"
        change.said_url = f"{session_chat_url(event.session)}#event-{event.event_id}"
    return change


@login_required
def memory_page(request: HttpRequest) -> HttpResponse:
    """The user's memories grouped by topic, or the best matches of a search (``q``)."""
    return _memory_page_render(
        request, query=request.GET.get("q", ""), page_number=request.GET.get("page")
    )


def _memory_page_render(
    request: HttpRequest,
    *,
    query: str,
    page_number: str | None,
    refused: RefusedCorrection | None = None,
) -> HttpResponse:
    """The Memory page (a search's results, or a page of memories by topic); with ``refused``,
    that memory's correction form open again with the user's text and the reason (400)."""
    app_name = settings.DEFAULT_APP_NAME
    user_pk = request.user.pk
    query = query.strip()[:1000]
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
        page = paginator.get_page(page_number)
        items = [_item(m, user_pk=user_pk, labels=labels) for m in page.object_list]
        groups = [
            (label, list(members))
            for label, members in groupby(items, key=lambda item: item.topic_label)
        ]
    if refused is not None:
        for item in [*results, *(item for _, members in groups for item in members)]:
            if str(item.memory.id) == refused.memory_id:
                item.refused_text, item.refused_reason = refused.text, refused.reason
    context = {
        "topics": [(key, label) for key, label in labels.items()],
        "profile": selectors.profile_entries(app_name=app_name, user_pk=user_pk),
        "query": query,
        "results": results,
        "groups": groups,
        "page": page,
        "memory_settings": selectors.memory_settings_get(user_pk=user_pk),
        "total": selectors.user_memories(app_name=app_name, user_pk=user_pk).count(),
    }
    return render(request, "memory/memory.html", context, status=200 if refused is None else 400)


def _back(request: HttpRequest) -> HttpResponse:
    """Back to the Memory page, keeping the search the form was sent from."""
    query = request.POST.get("q", "").strip()
    url = reverse("memory")
    return redirect(f"{url}?{urlencode({'q': query})}" if query else url)


ADDED_ON_THE_MEMORY_PAGE = "added on the Memory page"
ADDED_TEXT_MAX_CHARS = 1000


@login_required
@require_POST
def memory_add(request: HttpRequest) -> HttpResponse:
    """A memory the person writes themselves: their explicit statement, through the same
    consolidation and safety checks as one said in a chat, its history saying where it came
    from."""
    app_name = settings.DEFAULT_APP_NAME
    text = " ".join(request.POST.get("text", "").split())
    topic = request.POST.get("topic", "")
    if topic not in {spec.key for spec in topics_for_app(app_name=app_name)}:
        topic = ""
    if not text or len(text) > ADDED_TEXT_MAX_CHARS:
        messages.error(
            request, f"Write what to remember, in at most {ADDED_TEXT_MAX_CHARS} characters."
        )
        return _back(request)
    memory = services.memory_add_stated(
        app_name=app_name,
        user_pk=request.user.pk,
        text=text,
        topic=topic,
        added_by=ADDED_ON_THE_MEMORY_PAGE,
    )
    if memory is None:
        messages.error(request, "Not added: it failed the memory safety check.")
    elif memory.status == MemoryStatus.QUARANTINED:
        messages.error(
            request,
            f"Not saved as a memory: {memory.review_reason}. {HELD_FOR_REVIEW_NOTE}",
        )
    else:
        messages.success(request, "Added. The assistant uses it from the next reply.")
    return _back(request)


@login_required
@require_http_methods(["GET", "POST"])
def memory_delete(request: HttpRequest, memory_id: str) -> HttpResponse:
    """GET asks first (the page a Delete link opens without JavaScript; with it, the Memory
    page asks in a dialog and posts here); POST deletes. Another person's memory is 404."""
    if request.method == "GET":
        memory = selectors.memory_get(
            app_name=settings.DEFAULT_APP_NAME, user_pk=request.user.pk, memory_id=memory_id
        )
        if memory is None:
            raise Http404("No such memory.")
        context = {"memory": memory, "query": request.GET.get("q", "")}
        return render(request, "memory/delete_confirm.html", context)
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
        return _memory_page_render(
            request,
            query=request.POST.get("q", ""),
            page_number=request.POST.get("page"),
            refused=RefusedCorrection(
                memory_id=memory_id, text=request.POST.get("text", ""), reason=str(error)
            ),
        )
    if memory is None:
        raise Http404("No such memory.")
    messages.success(request, "Memory corrected. The old text is kept in its history.")
    return _back(request)


@login_required
@require_POST
def memory_expiry(request: HttpRequest, memory_id: str) -> HttpResponse:
    """Forget the memory on a date (``forget_on``, YYYY-MM-DD, today or later) or keep it
    until deleted (``keep``)."""
    expires_at = None
    if "keep" not in request.POST:
        try:
            day = date.fromisoformat(request.POST.get("forget_on", ""))
        except ValueError:
            day = None
        if day is None or day < timezone.localdate():
            messages.error(request, "Not changed: choose a date from today on.")
            return _back(request)
        expires_at = timezone.make_aware(datetime.combine(day, time.max))
    memory = services.memory_expiry_set(
        app_name=settings.DEFAULT_APP_NAME,
        user_pk=request.user.pk,
        memory_id=memory_id,
        expires_at=expires_at,
    )
    if memory is None:
        raise Http404("No such memory.")
    if expires_at is None:
        messages.success(request, "This memory is kept until you delete it.")
    else:
        messages.success(request, f"This memory will be forgotten after {day:%-d %b %Y}.")
    return _back(request)


PROFILE_VALUE_MAX_CHARS = 1000


@login_required
@require_POST
def profile_change(request: HttpRequest) -> HttpResponse:
    """Correct (``action=correct`` with ``value``) or delete one entry of the user's profile
    card: a field of the profile (``field`` and ``key``) on the memory it comes from, a bare
    ``user:`` key otherwise."""
    app_name = settings.DEFAULT_APP_NAME
    user_pk = request.user.pk
    key, field_name = request.POST.get("key", ""), request.POST.get("field", "")
    held = next(
        (
            entry
            for entry in selectors.profile_entries(app_name=app_name, user_pk=user_pk)
            if entry.memory is not None and (entry.field, entry.key) == (field_name, key)
        ),
        None,
    )
    if request.POST.get("action") == "delete":
        if held is not None:
            services.memory_delete(app_name=app_name, user_pk=user_pk, memory_id=held.memory.pk)
        elif not session_services.user_state_delete(app_name=app_name, user_pk=user_pk, key=key):
            raise Http404("No such profile entry.")
        messages.success(request, f"“{key}” deleted from your profile. It will not be used again.")
        return redirect("memory")
    value = " ".join(request.POST.get("value", "").split())
    if not value or len(value) > PROFILE_VALUE_MAX_CHARS or "\x00" in value:
        messages.error(
            request, f"Not corrected: a value of 1 to {PROFILE_VALUE_MAX_CHARS} characters."
        )
        return redirect("memory")
    if held is not None:
        try:
            services.profile_field_correct(
                app_name=app_name,
                user_pk=user_pk,
                memory_id=held.memory.pk,
                field=held.field,
                entry=key if key != held.field else "",
                value=value,
            )
        except services.MemoryCorrectionError as error:
            messages.error(request, f"Not corrected: {error}")
            return redirect("memory")
    elif not session_services.user_state_correct(
        app_name=app_name, user_pk=user_pk, key=key, value=value
    ):
        raise Http404("No such profile entry.")
    messages.success(request, f"“{key}” corrected.")
    return redirect("memory")


@login_required
@require_http_methods(["GET", "POST"])
def memories_delete_all(request: HttpRequest) -> HttpResponse:
    """A confirmation page; deleting needs its form, with the box ticked."""
    app_name = settings.DEFAULT_APP_NAME
    count = selectors.user_memories(app_name=app_name, user_pk=request.user.pk).count()
    entries = selectors.profile_entries(app_name=app_name, user_pk=request.user.pk)
    count += sum(1 for entry in entries if entry.memory is None)
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
