from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from access_app.models import AccessGrant
from access_app.services import ADMINS_GROUP, KEY_MANAGERS_GROUP, REVIEWERS_GROUP
from tests.factories import AccessGrantFactory, MemoryFactory, StaffFactory


@pytest.fixture
def memory(user):
    return MemoryFactory(user=user, text="allergic to peanuts")


@pytest.fixture
def staff(db):
    """A staff account with no role and no grant."""
    return StaffFactory()


@pytest.fixture
def reviewer(db):
    account = StaffFactory()
    account.groups.add(Group.objects.get(name=REVIEWERS_GROUP))
    return account


@pytest.fixture
def memory_admin(db):
    account = StaffFactory()
    account.groups.add(Group.objects.get(name=ADMINS_GROUP))
    return account


@pytest.fixture
def key_manager(db):
    account = StaffFactory()
    account.groups.add(Group.objects.get(name=KEY_MANAGERS_GROUP))
    return account


@pytest.fixture
def granted_staff(user):
    """A plain staff account holding an active "memories" grant from ``user``."""
    return AccessGrantFactory(owner=user).grantee


@pytest.fixture
def expired_staff(user):
    """A plain staff account whose "memories" grant from ``user`` has ended."""
    grant = AccessGrantFactory(owner=user)
    AccessGrant.objects.filter(pk=grant.pk).update(
        created_at=timezone.now() - timedelta(days=3), expires_at=timezone.now() - timedelta(days=1)
    )
    return grant.grantee
