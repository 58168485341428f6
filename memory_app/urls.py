from django.urls import path

from memory_app import api

app_name = "memory_api"

urlpatterns = [
    path("memories/", api.MemoryListView.as_view(), name="memory-list"),
    path("memories/<id:memory_id>/", api.MemoryDetailView.as_view(), name="memory-detail"),
    path(
        "memories/<id:memory_id>/correct/",
        api.MemoryCorrectView.as_view(),
        name="memory-correct",
    ),
    path("memory-settings/", api.MemorySettingsView.as_view(), name="memory-settings"),
    path(
        "memory-pending/<id:session_id>/",
        api.PendingMemoryView.as_view(),
        name="memory-pending",
    ),
]
