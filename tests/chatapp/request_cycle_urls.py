"""A URL configuration for tests of the request cycle (``test_asgi_handler``): views that use
the database on their request's thread, during the request or after its response."""

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpResponse
from django.urls import include, path

from core.after_response import after_response

# The database connection each view used, in order.
connections_used: list = []


def accounts_count() -> int:
    connections_used.append(connections[DEFAULT_DB_ALIAS])  # the thread's own
    return get_user_model().objects.count()


def counted(request):
    return HttpResponse(str(accounts_count()))


async def counted_after_the_response(request):
    await after_response(sync_to_async(accounts_count)())
    return HttpResponse("later")


urlpatterns = [
    path("counted/", counted),
    path("counted-after-the-response/", counted_after_the_response),
    path("", include("chatapp.urls")),
]
