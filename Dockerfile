# The image run by every application service of docker-compose.yml
# (migrate, web, worker, beat); docs/deploy.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=chatapp.settings

# The processes run as this user, which cannot write the code or the static files.
RUN useradd --create-home --uid 1000 app \
    && mkdir -p /data/artifacts && chown app:app /data/artifacts

WORKDIR /app
# The locked versions (requirements/prod.txt, hashed), before the code: a change of the code
# alone reuses this layer. The code runs from /app (PYTHONPATH).
COPY requirements/prod.txt requirements/prod.txt
RUN pip install --no-cache-dir --require-hashes -r requirements/prod.txt
COPY . .
# Hashed, compressed static files (whitenoise serves them); collectstatic only
# reads settings, so a placeholder key is enough at build time.
RUN PRODUCTION=true DEBUG=false SECRET_KEY=collectstatic \
    python manage.py collectstatic --noinput --verbosity 0
# The code's bytecode, which the app user could not write: each process would otherwise compile
# the app from source as it starts.
RUN python -m compileall -q -j 0 .

USER app
EXPOSE 8000
# daphne as the project runs it (chatapp/webserver.py: WebSocket messages of any length get an
# answer). --verbosity 0: the app writes the access log itself (with request ids, as JSON).
CMD ["python", "-m", "chatapp.webserver", "--verbosity", "0", "--bind", "0.0.0.0", "--port", "8000", \
     "chatapp.asgi:application"]
