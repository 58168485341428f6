"""task_enqueue: work is sent after commit, and a broker outage never fails the caller."""

import pytest
from kombu.exceptions import OperationalError

from core.background import task_enqueue
from memory_app.tasks import memory_job_run


@pytest.mark.django_db
def test_a_task_the_broker_cannot_take_is_logged_and_the_caller_goes_on(
    settings, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    settings.BACKGROUND_TASKS = "celery"
    sent = []

    def broker_down(**kwargs):
        sent.append(kwargs)
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(memory_job_run, "apply_async", broker_down)

    with django_capture_on_commit_callbacks(execute=True):
        task_enqueue(task=memory_job_run, job_id="1b7e")

    assert [call["kwargs"] for call in sent] == [{"job_id": "1b7e"}]
    assert (
        'task memory_app.tasks.memory_job_run {"job_id": "1b7e"} not enqueued, '
        "the broker is unavailable" in caplog.text
    )
