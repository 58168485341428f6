from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


class StaffFactory(UserFactory):
    is_staff = True


class MemoryFactory(factory.django.DjangoModelFactory):
    """A user-scope memory in the default app, written directly (tests of reads only)."""

    class Meta:
        model = "memory_app.Memory"

    app_name = "chat"
    scope = "user"
    user = factory.SubFactory(UserFactory)
    topic = "preferences"
    text = factory.Sequence(lambda n: f"prefers tea number {n}")
    source_type = "explicit"


class AccessGrantFactory(factory.django.DjangoModelFactory):
    """An active grant of the "memories" scope for a week."""

    class Meta:
        model = "access_app.AccessGrant"

    owner = factory.SubFactory(UserFactory)
    grantee = factory.SubFactory(StaffFactory)
    scope = "memories"
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=7))


def session_key(session) -> str:
    """The key of the row of an ADK ``Session`` (turn claims and memory jobs name it by it)."""
    from sessions_app.models import SessionRecord

    return SessionRecord.objects.get(
        session_id=session.id, app_name=session.app_name, user_id=int(session.user_id)
    ).pk
