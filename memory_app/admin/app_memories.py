"""The console page that corrects the text of an app's shared memory (app scope), with a
reason: the memory's page links to it for staff who may change memories. The change is made
by ``memory_app.services.review.app_memory_staff_edit`` (a revision with the old and the new
text, who and why; an entry in the console's history). A user's memory is never edited here:
it is the user's to correct."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from memory_app.models import Memory, MemoryScope, MemoryStatus
from memory_app.services import review
from memory_app.services.app_memories import APP_MEMORY_MAX_CHARS


class AppMemoryEditForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5, "cols": 90}),
        max_length=APP_MEMORY_MAX_CHARS,
        help_text="What every user's agent in the app knows (secrets are masked).",
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        help_text="Kept in the memory's history with the old and the new text.",
    )


class AppMemoryEditing:
    """For the memories' admin: the edit page of an app's shared memory and its link."""

    def get_urls(self):
        edit = path(
            "<path:object_id>/edit/",
            self.admin_site.admin_view(self.app_memory_edit_view),
            name="memory_app_memory_edit",
        )
        return [edit, *super().get_urls()]

    def _may_edit(self, request: HttpRequest, memory: Memory) -> bool:
        """An app's active shared memory, and staff who may change memories and read it."""
        return (
            memory.scope == MemoryScope.APP
            and memory.status == MemoryStatus.ACTIVE
            and request.user.has_perm("memory_app.change_memory")
            and self.has_view_permission(request, memory)
        )

    def app_memory_edit_url(self, request: HttpRequest, memory: Memory) -> str:
        """The edit page of ``memory`` if ``request``'s staff member may edit it, else ''."""
        if not self._may_edit(request, memory):
            return ""
        return reverse("admin:memory_app_memory_edit", args=[quote(memory.pk)])

    def app_memory_edit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The form with the memory's text and a reason; saved, back to the memory's page."""
        memory = self.get_object(request, unquote(object_id))
        if memory is None or not self._may_edit(request, memory):
            raise PermissionDenied
        page = reverse("admin:memory_app_memory_change", args=[quote(memory.pk)])
        form = AppMemoryEditForm(
            request.POST if request.method == "POST" else None, initial={"text": memory.text}
        )
        if form.is_valid():
            try:
                review.app_memory_staff_edit(
                    memory_id=str(memory.pk),
                    actor=request.user,
                    text=form.cleaned_data["text"],
                    reason=form.cleaned_data["reason"].strip(),
                    path=request.get_full_path(),
                )
            except review.ReviewError as error:
                form.add_error("text", str(error))
            else:
                self.message_user(request, "The shared memory's text is changed.", messages.SUCCESS)
                return HttpResponseRedirect(page)
        context = {
            **self.admin_site.each_context(request),
            "title": "Edit the text of a shared memory",
            "opts": self.model._meta,
            "original": memory,
            "form": form,
            "memory_url": page,
        }
        return TemplateResponse(request, "admin/memory_app/memory/app_memory_edit.html", context)
