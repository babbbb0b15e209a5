# Build stage: resolve the locked dependencies into a virtual environment with uv (uv stays in this stage).
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
COPY kernel ./kernel
RUN uv sync --locked --no-dev --no-editable \
    # Libraries' own test suites (scipy's and numpy's are most of them, ~60 MB): never imported by a service.
    && find /app/.venv/lib -depth -type d -path "*/site-packages/*" \( -name tests -o -name test \) -prune \
        -exec rm -rf {} +

# Runtime stage: the virtual environment only (no uv, no sources, no build files), run by an unprivileged user.
# The CJK font for charts comes inside the environment (the noto-cjk-sans-otc package): no system font package.
FROM python:3.12-slim AS runtime
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
# `lookout healthcheck` asks /healthz and exits 0 or 1: the same command serves Docker's HEALTHCHECK (kept only in
# Docker-format images), docker-compose's `healthcheck:`, `podman run --health-cmd` and Kubernetes exec probes,
# which is how an OCI image (podman's default format, which has no HEALTHCHECK) gets one.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 CMD ["lookout", "healthcheck"]
CMD ["lookout", "run"]
