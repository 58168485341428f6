"""HTML pages of the sessions app: the chat page.

The page is a shell: the conversation, the session list and the state panel
are loaded by its scripts from the REST API and the chat WebSocket.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from sessions_app import selectors
from sessions_app.runtime.models import gemini_configured
from sessions_app.runtime.offline import OFFLINE_MODEL_NAME

SESSION_ID_PLACEHOLDER = "session-id"
SIDEBAR_PAGE_SIZE = 20


@login_required
def chat(request: HttpRequest, session_id: str | None = None) -> HttpResponse:
    """The chat page, with the user's session ``session_id`` open, or a new chat without one.

    A session the user does not have (another user's, an unknown or a
    deleted one) answers 404. The page says when the offline model answers.
    """
    title = ""
    temporary = False
    if session_id is not None:
        record = selectors.session_record_get(user_pk=request.user.pk, session_id=session_id)
        if record is None:
            raise Http404("No such chat.")
        title, temporary = record.title, record.temporary
    session_url = reverse("chat-session", kwargs={"session_id": SESSION_ID_PLACEHOLDER})
    config = {
        "session_id": session_id,
        "title": title,
        "temporary": temporary,
        "app_name": settings.DEFAULT_APP_NAME,
        "sessions_url": reverse("sessions_api:session-list"),
        "chat_url": reverse("home"),
        "session_url_template": session_url,
        "socket_path_template": f"/ws/chat/{SESSION_ID_PLACEHOLDER}/",
        "session_id_placeholder": SESSION_ID_PLACEHOLDER,
        "sidebar_page_size": SIDEBAR_PAGE_SIZE,
    }
    context = {
        "chat_config": config,
        "offline": not gemini_configured(),
        "offline_model_name": OFFLINE_MODEL_NAME,
    }
    return render(request, "chat/chat.html", context)
