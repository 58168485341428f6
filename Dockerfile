# The image run by every application service of docker-compose.yml (web, worker, beat).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=chatapp.settings

WORKDIR /app
COPY . .
RUN pip install --no-cache-dir . \
    && PRODUCTION=true DEBUG=false SECRET_KEY=collectstatic \
       python manage.py collectstatic --noinput --verbosity 0

RUN useradd --create-home --uid 1000 app && chown -R app /app
USER app

EXPOSE 8000
CMD ["daphne", "--bind", "0.0.0.0", "--port", "8000", "chatapp.asgi:application"]
