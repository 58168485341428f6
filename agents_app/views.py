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

from agents_app.runtime.agents import agent_for_app, agent_from_app
from agents_app.runtime.models import agent_offline, model_label
from agents_app.runtime.offline import OFFLINE_MODEL_NAME
from agents_app.selectors import apps_usable_by
from sessions_app import selectors

SESSION_ID_PLACEHOLDER = "session-id"
SIDEBAR_PAGE_SIZE = 20


@login_required
def chat(request: HttpRequest, session_id: str | None = None) -> HttpResponse:
    """The chat page, with the user's session ``session_id`` open, or a new chat without one.

    A session the user does not have (another user's, an unknown or a
    deleted one) answers 404; ``?app_name=`` names its app when the user holds the id in
    several (ids are unique within an app). The page says which model answers (the offline model's
    banner when it does), for each app it offers: both banners are on the page, one hidden, so
    that picking another app shows its own. With more than one app open to the user it offers
    a picker of them (the app of the open chat chosen).
    ``?temporary=1`` without a session opens a temporary chat, ready to type in.
    """
    title = ""
    temporary = False
    record = None
    if session_id is not None:
        try:
            record = selectors.session_record_get(
                user_pk=request.user.pk,
                session_id=session_id,
                app_name=request.GET.get("app_name"),
            )
        except selectors.AmbiguousSessionError as error:
            raise Http404(str(error)) from None
        if record is None:
            raise Http404("No such chat.")
        title, temporary = record.title, record.temporary
    apps = [
        {
            "name": app.name,
            "title": app.label,
            "model": model_label(agent),
            "offline": agent_offline(agent),
        }
        for app in apps_usable_by(user=request.user)
        for agent in [agent_from_app(app)]
    ]
    names = [app["name"] for app in apps]
    if record is not None and record.app_name in names:
        app_name = record.app_name
    else:
        app_name = settings.DEFAULT_APP_NAME if settings.DEFAULT_APP_NAME in names else None
        app_name = app_name or (names[0] if names else settings.DEFAULT_APP_NAME)
    session_url = reverse("chat-session", kwargs={"session_id": SESSION_ID_PLACEHOLDER})
    config = {
        "session_id": session_id,
        "title": title,
        "temporary": temporary,
        "start_temporary": session_id is None and request.GET.get("temporary") == "1",
        "app_name": app_name,
        "apps": apps,
        "sessions_url": reverse("sessions_api:session-list"),
        "search_url": reverse("sessions_api:chats-search"),
        "chat_url": reverse("home"),
        "session_url_template": session_url,
        "socket_path_template": f"/ws/chat/{SESSION_ID_PLACEHOLDER}/",
        "session_id_placeholder": SESSION_ID_PLACEHOLDER,
        "sidebar_page_size": SIDEBAR_PAGE_SIZE,
    }
    agent = agent_for_app(app_name)
    context = {
        "chat_config": config,
        "offline": agent_offline(agent),
        "model_label": model_label(agent),
        "offline_model_name": OFFLINE_MODEL_NAME,
    }
    return render(request, "chat/chat.html", context)
