from django.urls import path

from access_app import views

app_name = "access"

urlpatterns = [
    path("", views.access_overview, name="overview"),
    path("grants/", views.grant_create, name="grant-create"),
    path("grants/<int:grant_id>/revoke/", views.grant_revoke, name="grant-revoke"),
    path("tokens/", views.token_create, name="token-create"),
    path("tokens/<id:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]
