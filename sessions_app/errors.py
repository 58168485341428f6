"""Errors of the session store. All are ``ValueError``s a caller can show as they are."""


class SessionStoreError(ValueError):
    """Base class: the request was wrong, nothing was written."""


class SessionNotFoundError(SessionStoreError):
    pass


class StaleSessionError(SessionStoreError):
    """The writer's copy of the session is older than the stored one (``SessionRevision``)."""


class SessionAlreadyExistsError(SessionStoreError):
    pass


class InvalidStateError(SessionStoreError):
    pass


class InvalidEventError(SessionStoreError):
    pass


class DuplicateEventError(InvalidEventError):
    """An event with this id is already stored in the session (a retried append)."""


class InvocationNotFoundError(SessionStoreError):
    pass


class AppNotFoundError(SessionStoreError):
    """No app of this name is registered."""


class AppForbiddenError(SessionStoreError):
    """The app exists but the caller may not use it."""


class InvalidArtifactError(SessionStoreError):
    """An artifact's name, scope or content was refused; nothing was stored."""
