from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import include, path
from drf_spectacular.views import SpectacularSwaggerSplitView

from access_app.forms import SignInForm
from agents_app import views as chat_views
from chatapp import api, views
from chatapp.schema import SchemaView
from memory_app import views as memory_views

urlpatterns = [
    path("", chat_views.chat, name="home"),
    path("chat/<id:session_id>/", chat_views.chat, name="chat-session"),
    path("memory/", memory_views.memory_page, name="memory"),
    path("memory/add/", memory_views.memory_add, name="memory-add"),
    path("memory/delete-all/", memory_views.memories_delete_all, name="memory-delete-all"),
    path("memory/profile/", memory_views.profile_change, name="memory-profile"),
    path("memory/<id:memory_id>/delete/", memory_views.memory_delete, name="memory-delete"),
    path("memory/<id:memory_id>/correct/", memory_views.memory_correct, name="memory-correct"),
    path("memory/<id:memory_id>/expiry/", memory_views.memory_expiry, name="memory-expiry"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/export/", views.data_export, name="data-export"),
    path("settings/delete/", views.data_delete, name="data-delete"),
    path("accounts/signup/", views.SignupView.as_view(), name="signup"),
    path("accounts/login/", LoginView.as_view(authentication_form=SignInForm), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("access/", include("access_app.urls")),
    path("api/", include("sessions_app.urls")),
    path("api/", include("memory_app.urls")),
    path("api/export/", api.ExportView.as_view(), name="api-export"),
    path("api/access/", include("access_app.api_urls")),
    path("api/v1/apps/<key:app_name>/", include("agents_app.service_api.urls")),
    path(
        "api/v1/apps/<key:app_name>/users/<key:user_id>/export/",
        api.EndUserExportView.as_view(),
        name="v1-user-export",
    ),
    path(
        "api/v1/apps/<key:app_name>/users/<key:user_id>/",
        api.EndUserDeleteView.as_view(),
        name="v1-user",
    ),
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]

handler404 = "chatapp.views.page_not_found"
handler500 = "chatapp.views.server_error"
