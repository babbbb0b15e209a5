# syntax=docker/dockerfile:1
# Build stage: resolve the locked dependencies into a virtual environment with uv.
FROM python:3.12-slim AS build
RUN pip install --no-cache-dir uv==0.13.9
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY app ./app
COPY bots ./bots
COPY agent ./agent
COPY monitors ./monitors
COPY research ./research
COPY sources ./sources
COPY storage ./storage
RUN uv sync --locked --no-dev --no-editable

# Runtime stage: the virtual environment only, run by an unprivileged user.
FROM python:3.12-slim AS runtime
# CJK fonts: charts title Chinese, Japanese and Korean topics and sources.
RUN apt-get update && apt-get install -y --no-install-recommends fonts-noto-cjk \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system lookout && useradd --system --gid lookout --home-dir /app lookout \
    && mkdir -p /data && chown lookout:lookout /data
COPY --from=build --chown=lookout:lookout /app/.venv /app/.venv
ENV PATH="/app/.venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    DATA_DIR=/data \
    HTTP_HOST=0.0.0.0 \
    HTTP_PORT=8080
WORKDIR /app
USER lookout
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status == 200 else 1)"]
CMD ["lookout", "run"]
