"""The "Access" page: who may read my data, grants given and revoked, and what staff did with it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from access_app import selectors, services
from access_app.forms import GrantForm, TokenForm
from access_app.models import AccessGrant, PersonalAccessToken

AUDIT_PAGE_SIZE = 50


def _page(request: HttpRequest, form: GrantForm, *, status: int = 200) -> HttpResponse:
    now = timezone.now()
    grants = list(selectors.grants_of_owner(owner=request.user))
    audit = Paginator(selectors.audit_entries_for_subject(user=request.user), AUDIT_PAGE_SIZE)
    audit_page = audit.get_page(request.GET.get("page"))
    subjects = selectors.audit_subjects_describe(user=request.user, entries=list(audit_page))
    context = {
        "form": form,
        "active_grants": [grant for grant in grants if grant.is_active(now=now)],
        "ended_grants": [grant for grant in grants if not grant.is_active(now=now)],
        "held_grants": (
            selectors.grants_active_for(grantee=request.user) if request.user.is_staff else []
        ),
        "audit_page": audit_page,
        "audit_rows": [(entry, subjects[entry.pk]) for entry in audit_page],
    }
    return render(request, "access/access.html", context, status=status)


@login_required
@require_GET
def access_overview(request: HttpRequest) -> HttpResponse:
    """The signed-in user's grants (active and ended) and the audit log of staff access."""
    return _page(request, GrantForm())


@login_required
@require_POST
def grant_create(request: HttpRequest) -> HttpResponse:
    """Give a staff account read access until a date; a bad entry shows the page with errors."""
    form = GrantForm(request.POST)
    if form.is_valid():
        try:
            grant = services.access_grant_create(
                owner=request.user,
                grantee_username=form.cleaned_data["grantee"],
                scope=form.cleaned_data["scope"],
                expires_at=form.expires_at(),
            )
        except ValidationError as error:
            for field, field_errors in error.message_dict.items():
                form.add_error("until" if field == "expires_at" else field, field_errors)
        else:
            messages.success(
                request,
                f"{grant.grantee.get_username()} may read {grant.get_scope_display().lower()} "
                f"until {grant.last_day:%-d %b %Y} (inclusive).",
            )
            return redirect("access:overview")
    return _page(request, form, status=400)


@login_required
@require_POST
def grant_revoke(request: HttpRequest, grant_id: int) -> HttpResponse:
    """End one of the user's grants now; another user's grant is 404."""
    try:
        grant = services.access_grant_revoke(owner=request.user, grant_id=grant_id)
    except AccessGrant.DoesNotExist:
        raise Http404("No such grant.") from None
    messages.success(request, f"{grant.grantee.get_username()} no longer has access.")
    return redirect("access:overview")


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    """Make a personal access token and show it once; a bad entry goes back to Settings."""
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            issued = services.access_token_create(
                user=request.user,
                name=form.cleaned_data["name"],
                scopes=form.scopes(),
                expires_in_days=form.expires_in_days(),
            )
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
        else:
            context = {"token": issued.token, "record": issued.record}
            return render(request, "access/token_created.html", context, status=201)
    else:
        messages.error(request, " ".join(m for errors in form.errors.values() for m in errors))
    return redirect("settings")


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke(request: HttpRequest, token_id: str) -> HttpResponse:
    """GET asks first (the page a Revoke link opens without JavaScript; with it, Settings asks
    in a dialog and posts here); POST revokes. Another user's token is 404."""
    if request.method == "GET":
        token = selectors.access_token_of(user=request.user, token_id=token_id)
        if token is None:
            raise Http404("No such token.")
        return render(request, "access/token_revoke.html", {"token": token})
    try:
        token = services.access_token_revoke(user=request.user, token_id=token_id)
    except PersonalAccessToken.DoesNotExist:
        raise Http404("No such token.") from None
    messages.success(request, f"The token {token.name!r} was revoked: it no longer connects.")
    return redirect("settings")
