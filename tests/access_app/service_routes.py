"""The service-account API's routes under ``api/v1/apps/<key:app_name>/``, which both access
matrices classify: one list, so a new route is added to both at once."""

V1_ROUTES = (
    "state/",
    "users/",
    "users/<key:user_id>/",
    "users/<key:user_id>/export/",
    "users/<key:user_id>/sessions/",
    "users/<key:user_id>/sessions/<key:session_id>/",
    "users/<key:user_id>/sessions/<key:session_id>/events/",
    "users/<key:user_id>/sessions/<key:session_id>/rewind/",
    "users/<key:user_id>/sessions/<key:session_id>/artifacts/",
    "users/<key:user_id>/sessions/<key:session_id>/artifacts/<key:filename>/",
    "users/<key:user_id>/sessions/<key:session_id>/artifacts/<key:filename>/versions/<id:version>/",
    "users/<key:user_id>/artifacts/",
    "users/<key:user_id>/artifacts/<key:filename>/",
    "users/<key:user_id>/artifacts/<key:filename>/versions/<id:version>/",
    "users/<key:user_id>/state/",
    "users/<key:user_id>/memory/generate/",
    "users/<key:user_id>/memory/events/",
    "users/<key:user_id>/memories/",
    "users/<key:user_id>/memories/search/",
    "users/<key:user_id>/memories/<id:memory_id>/",
    "jobs/<id:job_id>/",
    "memories/",
    "memories/<id:memory_id>/",
    "memory-lifetime/",
)
