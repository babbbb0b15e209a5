# The base of both stages: any Debian-like image with Python >= 3.11, `python3 -m venv` and CA certificates.
# Python's official slim image is the default; `bench/image.sh` builds one with debootstrap from Debian's mirror
# where no container registry is reachable, and passes `--build-arg BASE_IMAGE=localhost/lookout-base:bookworm-slim`
# (the runtime's: no apt, dpkg, perl or pip) and `--build-arg BUILD_IMAGE=localhost/lookout-build:bookworm` (the same
# Debian with apt and binutils). BUILD_IMAGE must hold the same Python as BASE_IMAGE: the venv is copied between them
# (BUILD_IMAGE defaults to BASE_IMAGE).
ARG BASE_IMAGE=python:3.12-slim
ARG BUILD_IMAGE=${BASE_IMAGE}

# Build stage: resolve the locked dependencies into a virtual environment with uv (uv stays in this stage).
FROM ${BUILD_IMAGE} AS build
# strip (binutils) for the extension modules; Debian's package, installed only where the base lacks it.
RUN command -v strip >/dev/null || { apt-get update && apt-get install -y --no-install-recommends binutils \
    && rm -rf /var/lib/apt/lists/*; }
# uv in a venv of its own: works with the official image and with Debian's Python (which refuses a system pip).
RUN python3 -m venv /opt/uv && /opt/uv/bin/pip install --no-cache-dir uv==0.13.9
# No bytecode from uv: docker/slim_venv.py compiles it (third-party packages as bytecode only, see there).
# UV_SYSTEM_CERTS: uv trusts the base image's certificate store (a base that adds a proxy's CA works too).
ENV PATH="/opt/uv/bin:$PATH" UV_COMPILE_BYTECODE=0 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    UV_SYSTEM_CERTS=1
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
        -exec rm -rf {} + \
    # Data and code the service never reads (~110 MB). wordfreq: a language's small list where a large one exists
    # (research/terms.py reads the large one) and Python jieba's dictionaries (not installed, never read). scipy:
    # only scipy.sparse is used (research/dedupe.py), which needs scipy's top-level modules and scipy._lib; the
    # rest and its bundled OpenBLAS/Fortran libraries go.
    && cd /app/.venv/lib/python3*/site-packages \
    && for small in wordfreq/data/small_*; do \
        if [ -e "wordfreq/data/large_${small#wordfreq/data/small_}" ]; then rm "$small"; fi; done \
    && rm -f wordfreq/data/jieba_*.txt \
    && find scipy -mindepth 1 -maxdepth 1 -type d ! -name _lib ! -name sparse ! -name __pycache__ -exec rm -rf {} + \
    && rm -rf scipy.libs \
    # The cut checked: what research/dedupe.py asks of scipy.sparse still works.
    && /app/.venv/bin/python -c "from scipy import sparse; \
        m = sparse.csr_matrix(sparse.diags([1.0, 2.0]) @ sparse.coo_matrix(([1.0], ([0], [1])), shape=(2, 2))); \
        assert sparse.triu(m @ m.T, k=1).tocoo().nnz == 0"
# Each cut checked as it is made (~800 MB of venv and base in all → 496 MB with bench/image.sh's base; sizes and
# costs in bench/README.md, "The image"): extension modules stripped of their symbol tables (each imports again),
# wordfreq's lists cut to the buckets research/terms.py reads (it reads the same words), the Japanese word table
# gzipped (unpacked to /data/cache/ipadic on the first Japanese text), type stubs and C sources removed, and
# third-party packages as bytecode only (Lookout's own and the few libraries that read their sources keep them).
COPY docker/slim_venv.py /tmp/slim_venv.py
RUN /app/.venv/bin/python /tmp/slim_venv.py /app/.venv

# Runtime stage: the virtual environment only (no uv, no sources, no build files), run by an unprivileged user.
# The CJK font for charts comes inside the environment (the noto-cjk-sans-otc package): no system font package.
# What the service writes goes under /data (the volume): the database, exports, the Japanese word table unpacked on
# first use (/data/cache/ipadic) and matplotlib's font cache (MPLCONFIGDIR; /app is not the user's to write), so the
# venv and the rest of the image can be read-only.
FROM ${BASE_IMAGE} AS runtime
RUN groupadd --system lookout && useradd --system --gid lookout --home-dir /app lookout \
    && mkdir -p /data && chown lookout:lookout /data
COPY --from=build --chown=lookout:lookout /app/.venv /app/.venv
ENV PATH="/app/.venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    DATA_DIR=/data \
    MPLCONFIGDIR=/data/cache/matplotlib \
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
