"""WebSocket routes of every app, gathered in one list for the ASGI router."""

from django.urls import path

from agents_app.chat.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/chat/<id:session_id>/", ChatConsumer.as_asgi(), name="chat"),
]
