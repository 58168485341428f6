"""Routes of the service-account API under ``/api/v1/apps/<app_name>/`` (the end users'
export and deletion, cross-app data rights, are routed by ``chatapp.urls``)."""

from django.urls import path

from agents_app.service_api import memory, sessions, users

USER = "users/<str:user_id>/"
SESSION = USER + "sessions/<str:session_id>/"

urlpatterns = [
    path("state/", sessions.AppStateView.as_view(), name="v1-app-state"),
    path("users/", users.EndUserListView.as_view(), name="v1-users"),
    path(USER + "sessions/", sessions.SessionListView.as_view(), name="v1-sessions"),
    path(SESSION, sessions.SessionDetailView.as_view(), name="v1-session"),
    path(SESSION + "events/", sessions.SessionEventsView.as_view(), name="v1-session-events"),
    path(SESSION + "rewind/", sessions.SessionRewindView.as_view(), name="v1-session-rewind"),
    path(USER + "state/", sessions.UserStateView.as_view(), name="v1-user-state"),
    path(USER + "memory/generate/", memory.MemoryGenerateView.as_view(), name="v1-memory-generate"),
    path(USER + "memory/events/", memory.MemoryEventsView.as_view(), name="v1-memory-events"),
    path(USER + "memories/", memory.MemoryListView.as_view(), name="v1-memories"),
    path(USER + "memories/search/", memory.MemorySearchView.as_view(), name="v1-memory-search"),
    path(USER + "memories/<str:memory_id>/", memory.MemoryDetailView.as_view(), name="v1-memory"),
    path("jobs/<str:job_id>/", memory.JobDetailView.as_view(), name="v1-job"),
    path("memories/", memory.AppMemoryListView.as_view(), name="v1-app-memories"),
    path("memories/<str:memory_id>/", memory.AppMemoryDetailView.as_view(), name="v1-app-memory"),
]
