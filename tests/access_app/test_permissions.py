"""Object permissions (rules) and the staff visibility selectors give the same answers."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from access_app import permissions
from access_app.models import AccessGrant
from access_app.selectors import (
    memories_visible_to_staff,
    sessions_visible_to_staff,
    staff_may_view_user_data,
)
from memory_app.models import Memory, MemoryRevision
from sessions_app import services as session_services
from sessions_app.models import SessionRecord
from tests.factories import AccessGrantFactory, MemoryFactory, StaffFactory
from tests.memory_app.support import turn_add

ROLES = [
    "owner",
    "other user",
    "anonymous",
    "staff",
    "granted staff",
    "expired staff",
    "reviewer",
    "memory admin",
    "key manager",
    "superuser",
]
# May read a user's memory / may delete it.
EXPECTED_MEMORY = {
    "owner": (True, True),
    "other user": (False, False),
    "anonymous": (False, False),
    "staff": (False, False),
    "granted staff": (True, False),
    "expired staff": (False, False),
    "reviewer": (True, False),
    "memory admin": (True, True),
    "key manager": (False, False),
    "superuser": (True, True),
}


@pytest.fixture
def actor(
    request,
    user,
    other_user,
    staff,
    granted_staff,
    expired_staff,
    reviewer,
    memory_admin,
    key_manager,
):
    return {
        "owner": user,
        "other user": other_user,
        "anonymous": AnonymousUser(),
        "staff": staff,
        "granted staff": granted_staff,
        "expired staff": expired_staff,
        "reviewer": reviewer,
        "memory admin": memory_admin,
        "key manager": key_manager,
        "superuser": StaffFactory(is_superuser=True),
    }[request.param]


@pytest.mark.django_db
@pytest.mark.parametrize("actor", ROLES, indirect=True)
def test_memory_object_permissions_by_role(actor, memory, request):
    may_view, may_delete = EXPECTED_MEMORY[request.node.callspec.params["actor"]]
    revision = MemoryRevision.objects.create(memory=memory, action="created")
    assert actor.has_perm("memory_app.view_memory", memory) is may_view
    assert actor.has_perm("memory_app.view_memoryrevision", revision) is may_view
    assert actor.has_perm("memory_app.delete_memory", memory) is may_delete
    visible = memories_visible_to_staff(staff=actor, queryset=Memory.objects.all())
    assert list(visible) == ([memory] if may_view else [])
    assert (
        staff_may_view_user_data(staff=actor, subject_user_pk=memory.user_id, scope="memories")
        is may_view
    )


@pytest.mark.django_db
def test_a_memories_grant_does_not_open_conversations(user, granted_staff, reviewer):
    session = session_services.session_create(app_name="chat", user_id=str(user.pk))
    turn_add(session, "my flight leaves at nine")
    record = SessionRecord.objects.get(session_id=session.id)
    event = record.events.first()
    assert not granted_staff.has_perm("sessions_app.view_sessionrecord", record)
    assert not staff_may_view_user_data(
        staff=granted_staff, subject_user_pk=user.pk, scope="conversations"
    )
    assert not sessions_visible_to_staff(staff=granted_staff, queryset=SessionRecord.objects.all())
    assert reviewer.has_perm("sessions_app.view_sessionrecord", record)
    assert reviewer.has_perm("sessions_app.view_eventrecord", event)
    assert not granted_staff.has_perm("sessions_app.view_eventrecord", event)
    assert user.has_perm("sessions_app.view_eventrecord", event)


@pytest.mark.django_db
def test_a_grant_covers_only_its_owner(user, other_user, granted_staff):
    mine = MemoryFactory(user=user)
    theirs = MemoryFactory(user=other_user)
    assert granted_staff.has_perm("memory_app.view_memory", mine)
    assert not granted_staff.has_perm("memory_app.view_memory", theirs)
    assert list(memories_visible_to_staff(staff=granted_staff, queryset=Memory.objects.all())) == [
        mine
    ]


@pytest.mark.django_db
def test_revoking_or_losing_staff_status_ends_access_at_once(user, memory):
    grant = AccessGrantFactory(owner=user)
    staff = grant.grantee
    assert staff.has_perm("memory_app.view_memory", memory)
    AccessGrant.objects.filter(pk=grant.pk).update(revoked_at=timezone.now())
    assert not staff.has_perm("memory_app.view_memory", memory)
    AccessGrantFactory(owner=user, grantee=staff)
    staff.is_staff = False
    assert not staff.has_perm("memory_app.view_memory", memory)
    assert not memories_visible_to_staff(staff=staff, queryset=Memory.objects.all()).exists()


@pytest.mark.django_db
def test_app_memories_need_the_global_permission(granted_staff, reviewer):
    shared = Memory.objects.create(
        app_name="chat", scope="app", text="opening hours 9-5", source_type="bootstrapped"
    )
    assert not granted_staff.has_perm("memory_app.view_memory", shared)
    assert reviewer.has_perm("memory_app.view_memory", shared)


@pytest.mark.django_db
def test_quarantine_decisions_belong_to_reviewers_and_admins(staff, reviewer, memory_admin, user):
    assert not staff.has_perm("memory_app.review_quarantine")
    assert not user.has_perm("memory_app.review_quarantine")
    assert reviewer.has_perm("memory_app.review_quarantine")
    assert memory_admin.has_perm("memory_app.review_quarantine")


@pytest.mark.django_db
def test_group_predicates(staff, reviewer, memory_admin):
    assert permissions.is_memory_reviewer(reviewer)
    assert not permissions.is_memory_reviewer(staff)
    assert permissions.is_memory_admin(memory_admin)
    assert not permissions.is_memory_admin(reviewer)


@pytest.mark.django_db
def test_owner_predicates_follow_provenance(user, other_user, memory):
    revision = MemoryRevision.objects.create(memory=memory, action="created")
    assert permissions.is_owner(user, revision)
    assert not permissions.is_owner(other_user, revision)
    assert not permissions.is_owner(user, None)
