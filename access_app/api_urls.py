from django.urls import path

from access_app import api

app_name = "access_api"

urlpatterns = [
    path("grants/", api.GrantListView.as_view(), name="grant-list"),
    path("grants/<int:grant_id>/revoke/", api.GrantRevokeView.as_view(), name="grant-revoke"),
    path("audit/", api.AuditEntryListView.as_view(), name="audit-list"),
]
