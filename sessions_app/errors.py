"""Errors of the session store. All are ``ValueError``s a caller can show as they are."""


class SessionStoreError(ValueError):
    """Base class: the request was wrong, nothing was written."""


class SessionNotFoundError(SessionStoreError):
    pass


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
