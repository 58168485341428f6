"""Start-up tuning shared by every long-running process (web server, Celery worker).

A server keeps a large, long-lived heap (Django, pydantic models, google-genai
types), and CPython's full garbage collections walk all of it: on a 2-core
machine one full collection took 90-140 ms, landing on whichever request
happened to allocate the object that triggered it. Freezing the start-up
heap takes it out of every later collection, and a larger first-generation
threshold makes collections rarer while a request builds thousands of
short-lived objects (reading a long session's events).
"""

import gc

FIRST_GENERATION_THRESHOLD = 50_000


def process_tune_gc() -> None:
    """Freeze what start-up allocated and raise the first GC threshold; call once, after setup."""
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(FIRST_GENERATION_THRESHOLD, second, third)
