"""The audit of staff views in the console: every list or page that shows a user's data is
written to that user's audit log, which the user can read. The apps' admins call these."""

from __future__ import annotations

from django.http import HttpRequest

from access_app.models import AuditAction
from access_app.services import audit_record


def audit_page_viewed(request: HttpRequest, response, *, object_type: str) -> None:
    """Record a list page in the audit log of every user whose data it showed."""
    changelist = getattr(response, "context_data", {}).get("cl")
    if response.status_code != 200 or changelist is None:
        return
    for owner_pk in sorted({row.user_id for row in changelist.result_list} - {None}):
        audit_record(
            actor=request.user,
            subject_user_pk=owner_pk,
            action=AuditAction.VIEW,
            object_type=object_type,
            path=request.get_full_path(),
        )


def audit_object_viewed(request: HttpRequest, response, obj) -> None:
    """Record a page of one user's object (memory, session) in that user's audit log."""
    if obj is None or response.status_code != 200:
        return
    audit_record(
        actor=request.user,
        subject_user_pk=obj.user_id,
        action=AuditAction.VIEW,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        path=request.get_full_path(),
    )
