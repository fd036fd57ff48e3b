# One image for every BAML Studio backend process; docker-compose.yml picks the command.
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

# The server's dependencies come from the lock, every one pinned and hash-checked (`./dev lock`
# writes it from pyproject.toml's base and `server` lists); its own layer, so a code change does not
# reinstall them. The project itself is then installed without resolving anything again.
COPY requirements/server.lock ./requirements/server.lock
RUN pip install --require-hashes -r requirements/server.lock

COPY pyproject.toml README.md ./
COPY formats ./formats
COPY publisher ./publisher
COPY api ./api
COPY activities ./activities
COPY workflows ./workflows
COPY worker ./worker
RUN pip install --no-deps . && pip check \
    && useradd --system --uid 10001 --home /app baml && mkdir -p /var/lib/baml && chown baml /var/lib/baml

USER baml
WORKDIR /var/lib/baml
CMD ["baml-studio", "--help"]
