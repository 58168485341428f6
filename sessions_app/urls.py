from django.urls import path

from sessions_app import api, artifacts_api, search_api

app_name = "sessions_api"

urlpatterns = [
    path("search/", search_api.ChatSearchView.as_view(), name="chats-search"),
    path("sessions/", api.SessionListView.as_view(), name="session-list"),
    path("sessions/<id:session_id>/", api.SessionDetailView.as_view(), name="session-detail"),
    path(
        "sessions/<id:session_id>/events/", api.SessionEventsView.as_view(), name="session-events"
    ),
    path("sessions/<id:session_id>/state/", api.SessionStateView.as_view(), name="session-state"),
    path(
        "sessions/<id:session_id>/rewind/", api.SessionRewindView.as_view(), name="session-rewind"
    ),
    path(
        "sessions/<id:session_id>/artifacts/",
        artifacts_api.SessionArtifactsView.as_view(),
        name="session-artifacts",
    ),
    path(
        "artifacts/<id:artifact_id>/content/",
        artifacts_api.ArtifactContentView.as_view(),
        name="artifact-content",
    ),
    path(
        "artifacts/<id:artifact_id>/thumbnail/",
        artifacts_api.ArtifactThumbnailView.as_view(),
        name="artifact-thumbnail",
    ),
]
