"""What the console's actions share: the confirmation page that asks for a reason, a change
applied to each selected item with a report of what was done and refused, the way back to the
page an action started from, and the re-run of generation for sessions (an action of the
memories and of the sessions admin)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme

from memory_app.services import review


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        required=False,
        max_length=2000,
        help_text="Kept in the memory's history and in the audit log the user can read.",
    )


def reason_confirmed(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet,
    *,
    title: str,
    reason_required: bool,
) -> str | TemplateResponse:
    """The reason given on the action's confirmation page, or that page (asked again with an
    error when a required reason is missing)."""
    form = ReasonForm(request.POST if "confirm" in request.POST else None)
    if form.is_bound and form.is_valid():
        reason = form.cleaned_data["reason"].strip()
        if reason or not reason_required:
            return reason
        form.add_error("reason", "Say why: this change removes or hides what the user said.")
    form.fields["reason"].required = reason_required
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "objects": queryset,
        "form": form,
        "action": request.POST.get("action", ""),
        "selected": request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME),
        "opts": modeladmin.model._meta,
        "reason_required": reason_required,
        "next": _next_url(request),
    }
    return TemplateResponse(request, "admin/memory_app/action_confirm.html", context)


def _apply(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    items: list,
    change,
    *,
    done: str,
) -> None:
    """Call ``change(item)`` for each item, reporting what was done and what was refused."""
    succeeded = 0
    for item in items:
        try:
            change(item)
        except review.ReviewError as error:
            modeladmin.message_user(request, f"{item}: {error}", messages.WARNING)
        else:
            succeeded += 1
    if succeeded:
        modeladmin.message_user(request, f"{done}: {succeeded}.", messages.SUCCESS)


def _next_url(request: HttpRequest) -> str:
    """The page the action was started from (``next``), only if it is a page of this site:
    it becomes a redirect and the confirmation page's Cancel link, where another site's
    address or a ``javascript:`` URL must never land."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


def _back_to(request: HttpRequest) -> HttpResponseRedirect | None:
    """Back to the page the action was started from (a memory's detail page), if it is ours."""
    target = _next_url(request)
    return HttpResponseRedirect(target) if target else None


def sessions_regenerate(
    modeladmin: admin.ModelAdmin, request: HttpRequest, session_ids: list[str]
) -> HttpResponse | None:
    """Queue a re-run of generation for each session, after a confirmation page."""
    from sessions_app.models import SessionRecord

    sessions = SessionRecord.objects.filter(pk__in=session_ids)
    reason = reason_confirmed(
        modeladmin,
        request,
        sessions,
        title="Re-run memory generation for these sessions",
        reason_required=False,
    )
    if isinstance(reason, TemplateResponse):
        return reason
    _apply(
        modeladmin,
        request,
        list(sessions),
        lambda session: review.memory_session_regenerate(
            session_id=session.pk, actor=request.user, reason=reason, path=request.get_full_path()
        ),
        done="Generation queued for sessions",
    )
    return None
