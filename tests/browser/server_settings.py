"""The settings of the servers the browser tests start: the app's own, but for the password
hasher.

Django's PBKDF2 hasher is slow on purpose: a quarter of a second of processor time for each
password set or checked. The browser tests sign in through the form and give users passwords
many times a run, and what they check is what the pages do, not the hash; the tests that run
in pytest's own process use the same fast hasher (tests/conftest.py).
"""

from chatapp.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
