"""JOB_QUEUE and the roles: refused with one sentence where they cannot work; `lookout jobs` shows the queue."""

from __future__ import annotations

import asyncio

import pytest
from procrastinate.jobs import Status
from typer.testing import CliRunner

from app.cli import cli
from app.jobqueue import JobQueue, process_name
from app.settings import Settings, SettingsError, load_settings

runner = CliRunner()


def test_the_embedded_queue_is_the_default() -> None:
    settings = load_settings()
    assert settings.job_queue == "embedded" and not settings.scaled_out


def test_procrastinate_on_sqlite_is_refused_with_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOB_QUEUE", "procrastinate")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert "JOB_QUEUE=procrastinate needs a PostgreSQL DATABASE_URL" in message
    assert message.count(".") == 1 and message.endswith(".")


def test_an_unknown_job_queue_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOB_QUEUE", "celery")
    with pytest.raises(SettingsError, match="JOB_QUEUE"):
        load_settings()


@pytest.mark.parametrize("role", ["web", "worker"])
def test_a_role_without_the_job_queue_is_refused(role: str) -> None:
    result = runner.invoke(cli, ["run", "--role", role])
    assert result.exit_code == 2
    assert f"--role {role} needs JOB_QUEUE=procrastinate" in result.output


def test_jobs_without_a_job_queue_says_why() -> None:
    result = runner.invoke(cli, ["jobs"])
    assert result.exit_code == 0
    assert "There is no job queue" in result.output and "JOB_QUEUE=procrastinate" in result.output


@pytest.mark.postgres
def test_jobs_shows_waiting_running_and_failed_jobs(job_queue_settings: Settings) -> None:
    settings = job_queue_settings

    async def seed() -> None:
        async with JobQueue(settings, name=process_name("test")) as queue:
            assert await queue.defer_run(1) and await queue.defer_run(2)
            assert not await queue.defer_run(1)  # its queueing lock: one waiting run per monitor
            assert await queue.defer_delivery(7)
            failed = await queue.app.configure_task(name="lookout.deliver", queue="deliveries").defer_async(chat_id=8)
            await queue.app.job_manager.finish_job_by_id_async(failed, status=Status.FAILED, delete_job=False)

    asyncio.run(seed())
    result = runner.invoke(cli, ["jobs"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    run_line = next(line for line in lines if line.startswith("lookout.run_monitor"))
    deliver_line = next(line for line in lines if line.startswith("lookout.deliver"))
    assert run_line.split()[1:4] == ["2", "0", "0"]
    assert deliver_line.split()[1:4] == ["1", "0", "1"]
    assert "Queue depth: 3 waiting, 0 running, 1 failed." in result.output
    assert "lookout.deliver(chat_id=8) after 1 attempt(s)" in result.output
    assert "Workers: none running" in result.output


def test_the_tick_defers_no_second_run_for_a_monitor_whose_run_is_under_way(job_queue_settings: Settings) -> None:
    """A run under way holds no queueing lock (procrastinate's lock covers waiting jobs only): the minute tick must
    not queue a second job for that monitor, which would only wait behind the first and find nothing due."""

    async def scenario() -> tuple[int, int, list[str]]:
        async with JobQueue(job_queue_settings, name=process_name("test")) as queue:
            manager = queue.app.job_manager
            assert await queue.defer_due_runs([1, 2]) == 2
            worker_id = await manager.register_worker()
            taken = await manager.fetch_job(queues=None, worker_id=worker_id)  # one run is now under way
            assert taken is not None and taken.status == "doing"
            again = await queue.defer_due_runs([1, 2, 3])  # the next tick: both still due, and a third
            jobs = await manager.list_jobs_async(task="lookout.run_monitor")
            return taken.task_kwargs["monitor_id"], again, sorted(f"{j.queueing_lock}:{j.status}" for j in jobs)

    running, again, jobs = asyncio.run(scenario())
    assert again == 1, "only monitor 3 gets a job: 1 and 2 have one waiting or under way"
    waiting = 3 - running
    assert jobs == sorted([f"monitor:{running}:doing", f"monitor:{waiting}:todo", "monitor:3:todo"])
