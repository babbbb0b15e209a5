"""The container files agree with the app: what the image runs, where data lives, how health is checked."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "bots", "agent", "monitors", "research", "sources", "storage")


def test_dockerfile_runs_lookout_as_non_root_with_data_volume_and_healthcheck() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+) AS (\w+)", dockerfile, flags=re.MULTILINE)
    assert stages == [("${BUILD_IMAGE}", "build"), ("${BASE_IMAGE}", "runtime")]
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert base and base[1].startswith("python:") and base[1].endswith("-slim")  # one users can pull by default
    # The build stage runs on the same base unless told otherwise (bench/image.sh builds on a fuller one).
    assert re.search(r"^ARG BUILD_IMAGE=\$\{BASE_IMAGE\}$", dockerfile, flags=re.MULTILINE)
    assert "uv sync --locked --no-dev" in dockerfile
    for package in PACKAGES:
        assert f"COPY {package} ./{package}" in dockerfile, f"{package} is not copied into the image"
    assert re.search(r"^USER lookout$", dockerfile, flags=re.MULTILINE)
    assert 'VOLUME ["/data"]' in dockerfile and "DATA_DIR=/data" in dockerfile
    assert 'CMD ["lookout", "healthcheck"]' in dockerfile.split("HEALTHCHECK", 1)[1]
    assert dockerfile.rstrip().endswith('CMD ["lookout", "run"]')


def test_the_image_is_lean_and_builds_from_package_registries_only() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "# syntax=" not in dockerfile  # a frontend image would be pulled from a registry at build time
    runtime = dockerfile.split(" AS runtime", 1)[1]
    assert "apt-get" not in runtime and "fonts-noto" not in runtime  # the CJK font comes in the environment
    assert "uv" not in runtime.replace("/app/.venv", "")  # the build tool stays in the build stage
    assert "COPY --from=build --chown=lookout:lookout /app/.venv /app/.venv" in runtime
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".env", "data", "tests", "bench", "docs", "**/__pycache__"} <= set(ignored)


def test_the_health_command_is_in_compose_too_for_oci_images() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name in ("lookout", "web-1", "worker-1"):
        assert compose["services"][name]["healthcheck"]["test"] == ["CMD", "lookout", "healthcheck"]


def test_compose_has_the_app_and_an_optional_postgres_profile() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    app, postgres = compose["services"]["lookout"], compose["services"]["postgres"]
    assert app["build"] == "."
    assert "lookout-data:/data" in app["volumes"]
    assert app["environment"]["HTTP_HOST"] == "0.0.0.0"
    assert "profiles" not in app
    assert postgres["profiles"] == ["postgres", "scale"]
    assert postgres["environment"]["POSTGRES_DB"] == "lookout"
    assert set(compose["volumes"]) == {"lookout-data", "postgres-data"}


def test_compose_scale_profile_runs_two_web_and_two_worker_processes_on_postgres() -> None:
    """Parsed only: docker is not run by the tests (the YAML, its merge keys and what they wire are checked)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    scaled = {name: service for name, service in services.items() if "scale" in service.get("profiles", [])}
    assert set(scaled) == {"web-1", "web-2", "worker-1", "worker-2", "postgres"}
    roles = {name: service["command"][-1] for name, service in scaled.items() if name != "postgres"}
    assert roles == {"web-1": "web", "web-2": "web", "worker-1": "worker", "worker-2": "worker"}
    postgres_env = services["postgres"]["environment"]
    expected_url = (
        f"postgresql+asyncpg://{postgres_env['POSTGRES_USER']}:{postgres_env['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{postgres_env['POSTGRES_DB']}"
    )
    for name in roles:
        service = scaled[name]
        assert service["command"][:3] == ["lookout", "run", "--role"]
        assert service["environment"]["JOB_QUEUE"] == "procrastinate"
        assert service["environment"]["DATABASE_URL"] == expected_url
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "lookout-data:/data" in service["volumes"]  # one DATA_DIR: a worker sends files another wrote
    host_ports = [port.split(":")[0] for name in ("web-1", "web-2") for port in scaled[name]["ports"]]
    assert len(set(host_ports)) == 2 and "8080" not in host_ports
    assert "profiles" not in services["lookout"]  # `docker compose up` still runs the one embedded process


def test_every_package_is_in_the_wheel_and_says_its_job() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for package in PACKAGES:
        assert f'"{package}"' in pyproject.split("[tool.hatch.build.targets.wheel]", 1)[1].split("\n[", 1)[0]
        docstring = (ROOT / package / "__init__.py").read_text().lstrip()
        assert docstring.startswith('"""') and len(docstring.split('"""')[1]) > 20
