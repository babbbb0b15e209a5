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
    assert len(stages) == 2 and all(image.startswith("python:") and image.endswith("-slim") for image, _ in stages)
    assert "uv sync --locked --no-dev" in dockerfile
    for package in PACKAGES:
        assert f"COPY {package} ./{package}" in dockerfile, f"{package} is not copied into the image"
    assert re.search(r"^USER lookout$", dockerfile, flags=re.MULTILINE)
    assert 'VOLUME ["/data"]' in dockerfile and "DATA_DIR=/data" in dockerfile
    assert "/healthz" in dockerfile.split("HEALTHCHECK", 1)[1]
    assert dockerfile.rstrip().endswith('CMD ["lookout", "run"]')


def test_compose_has_the_app_and_an_optional_postgres_profile() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    app, postgres = compose["services"]["lookout"], compose["services"]["postgres"]
    assert app["build"] == "."
    assert "lookout-data:/data" in app["volumes"]
    assert app["environment"]["HTTP_HOST"] == "0.0.0.0"
    assert "profiles" not in app
    assert postgres["profiles"] == ["postgres"]
    assert postgres["environment"]["POSTGRES_DB"] == "lookout"
    assert set(compose["volumes"]) == {"lookout-data", "postgres-data"}


def test_every_package_is_in_the_wheel_and_says_its_job() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for package in PACKAGES:
        assert f'"{package}"' in pyproject.split("[tool.hatch.build.targets.wheel]", 1)[1].split("\n[", 1)[0]
        docstring = (ROOT / package / "__init__.py").read_text().lstrip()
        assert docstring.startswith('"""') and len(docstring.split('"""')[1]) > 20
