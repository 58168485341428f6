from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from chatapp import views
from sessions_app import views as chat_views

urlpatterns = [
    path("", chat_views.chat, name="home"),
    path("chat/<str:session_id>/", chat_views.chat, name="chat-session"),
    path("accounts/signup/", views.SignupView.as_view(), name="signup"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", include("sessions_app.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
