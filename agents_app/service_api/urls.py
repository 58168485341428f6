"""Routes of the service-account API under ``/api/v1/apps/<app_name>/`` (the end users'
export and deletion, cross-app data rights, are routed by ``chatapp.urls``)."""

from django.urls import path

from agents_app.service_api import artifacts, memory, sessions, users

USER = "users/<key:user_id>/"
SESSION = USER + "sessions/<key:session_id>/"
FILE = "artifacts/<key:filename>/"

urlpatterns = [
    path("state/", sessions.AppStateView.as_view(), name="v1-app-state"),
    path("users/", users.EndUserListView.as_view(), name="v1-users"),
    path(USER + "sessions/", sessions.SessionListView.as_view(), name="v1-sessions"),
    path(SESSION, sessions.SessionDetailView.as_view(), name="v1-session"),
    path(SESSION + "events/", sessions.SessionEventsView.as_view(), name="v1-session-events"),
    path(SESSION + "rewind/", sessions.SessionRewindView.as_view(), name="v1-session-rewind"),
    path(SESSION + "artifacts/", artifacts.ArtifactListView.as_view(), name="v1-artifacts"),
    path(SESSION + FILE, artifacts.ArtifactDetailView.as_view(), name="v1-artifact"),
    path(
        SESSION + FILE + "versions/<id:version>/",
        artifacts.ArtifactVersionView.as_view(),
        name="v1-artifact-version",
    ),
    path(USER + "artifacts/", artifacts.UserArtifactListView.as_view(), name="v1-user-artifacts"),
    path(USER + FILE, artifacts.UserArtifactDetailView.as_view(), name="v1-user-artifact"),
    path(
        USER + FILE + "versions/<id:version>/",
        artifacts.UserArtifactVersionView.as_view(),
        name="v1-user-artifact-version",
    ),
    path(USER + "state/", sessions.UserStateView.as_view(), name="v1-user-state"),
    path(USER + "memory/generate/", memory.MemoryGenerateView.as_view(), name="v1-memory-generate"),
    path(USER + "memory/events/", memory.MemoryEventsView.as_view(), name="v1-memory-events"),
    path(USER + "memories/", memory.MemoryListView.as_view(), name="v1-memories"),
    path(USER + "memories/search/", memory.MemorySearchView.as_view(), name="v1-memory-search"),
    path(USER + "memories/<id:memory_id>/", memory.MemoryDetailView.as_view(), name="v1-memory"),
    path("jobs/<id:job_id>/", memory.JobDetailView.as_view(), name="v1-job"),
    path("memories/", memory.AppMemoryListView.as_view(), name="v1-app-memories"),
    path("memory-lifetime/", memory.AppMemoryLifetimeView.as_view(), name="v1-memory-lifetime"),
    path("memories/<id:memory_id>/", memory.AppMemoryDetailView.as_view(), name="v1-app-memory"),
]
