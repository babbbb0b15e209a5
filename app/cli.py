"""The `lookout` command line: run the service, chat, manage the database, collect and research."""

from __future__ import annotations

import asyncio
import logging
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from app.destination_commands import destinations_cli
from app.logging_setup import configure_logging, silence_library_banners
from app.monitor_commands import monitors_cli
from research import MAX_COLLECTION_TARGET, CollectionGoal

if TYPE_CHECKING:  # every command imports what it needs when it runs, so `lookout --help` answers at once
    from app.settings import Settings

cli = typer.Typer(
    name="lookout",
    help="Lookout keeps watch for you: standing monitors and on-the-spot research in your chats.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
SourcesOption = Annotated[
    str | None,
    typer.Option("--sources", "-s", help="Comma-separated source names or rss:<url> (default: a keyless mix)."),
]
db_cli = typer.Typer(help="Manage the database.", no_args_is_help=True)
cli.add_typer(db_cli, name="db")
cli.add_typer(monitors_cli, name="monitors")
cli.add_typer(destinations_cli, name="destinations")


@cli.callback()
def _process_start() -> None:
    """Runs before every command: nothing but Lookout may write to the person's terminal."""
    silence_library_banners()


CLI_LOG = "lookout-cli.log"
"""Where one-shot commands (research, collect, monitors, db) log, under DATA_DIR: their console is for people."""


def failure(message: str, *, code: int = 1) -> typer.Exit:
    """Say on stderr why the command stops and the exit to raise (2: the command line or settings were wrong)."""
    typer.echo(message, err=True)
    return typer.Exit(code=code)


def startup(*, log_to_console: bool = False) -> Settings:
    """Load settings and set up logging, or exit with the one-sentence reason the configuration is wrong.

    Logs go to DATA_DIR/lookout-cli.log, so no library's lines (migrations, web search engines, the scheduler)
    mix into what a command prints; only the service (`lookout run`) logs to the console, as services do.
    """
    from app.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        raise failure(str(exc), code=2) from None
    log_file = None if log_to_console else settings.data_dir / CLI_LOG
    configure_logging(level=settings.log_level, secrets=settings.secret_values(), file=log_file)
    return settings


@cli.command()
def version() -> None:
    """Print Lookout's version and the versions of the libraries it stands on."""
    import importlib.metadata  # here, not at the top: it costs every other command a few hundredths of a second
    import platform

    packages = ("pydantic-ai-slim", "google-genai", "python-telegram-bot", "slack-bolt", "sqlalchemy")
    typer.echo(f"lookout {importlib.metadata.version('lookout')}")
    typer.echo(f"python {platform.python_version()}")
    for name in packages:
        typer.echo(f"{name} {importlib.metadata.version(name)}")


@db_cli.command("upgrade")
def db_upgrade() -> None:
    """Apply every pending migration to DATABASE_URL (this also happens at every start)."""
    settings = startup()
    from storage import upgrade_database

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(upgrade_database(settings.database_url))
    typer.echo("Database is up to date.")


NOTHING_TO_SERVE = (
    "Lookout has no chat to serve: neither TELEGRAM_BOT_TOKEN nor SLACK_BOT_TOKEN is set. Next step: create a "
    "Telegram bot with @BotFather and set TELEGRAM_BOT_TOKEN, or create a Slack app from slack_app_manifest.yaml "
    "and set SLACK_BOT_TOKEN and SLACK_APP_TOKEN (in .env or the environment); or talk to Lookout in this "
    "terminal with `lookout chat`."
)
"""What `lookout run` says instead of starting when no platform is configured (it would idle with nobody to answer)."""


class Role(StrEnum):
    all = "all"
    web = "web"
    worker = "worker"


@cli.command()
def run(
    role: Annotated[
        Role,
        typer.Option(
            "--role",
            help="all: everything in one process; web: HTTP and the chat frontends; worker: monitor runs and "
            "deliveries. web and worker need JOB_QUEUE=procrastinate (PostgreSQL).",
        ),
    ] = Role.all,
) -> None:
    """Start every configured frontend, the scheduler and the HTTP server; stop with Ctrl-C or SIGTERM."""
    settings = startup(log_to_console=True)
    from app.service import RoleError, run_service

    if role is not Role.all and not settings.scaled_out:
        raise failure(
            f"--role {role.value} needs JOB_QUEUE=procrastinate and a PostgreSQL DATABASE_URL; "
            "without them `lookout run` is one process that does everything.",
            code=2,
        )
    if role is not Role.worker and settings.telegram_bot_token is None and settings.slack_bot_token is None:
        raise failure(NOTHING_TO_SERVE, code=2)
    try:
        asyncio.run(run_service(settings, role=role.value, tune_gc=True))
    except (OSError, RoleError) as exc:
        raise failure(f"Lookout could not start: {exc}") from None


@cli.command()
def doctor() -> None:
    """Check the database, each configured chat token, the models, each keyed source and the HTTP port; exit 1 if any
    check fails."""
    settings = startup()
    from app.doctor import report, run_checks

    if not report(asyncio.run(run_checks(settings)), typer.echo):
        raise typer.Exit(code=1)


HEALTH_TIMEOUT = 4.0
"""Seconds `lookout healthcheck` waits for /healthz: under the 5 s a container runtime gives a health command."""


@cli.command()
def healthcheck() -> None:
    """Ask the running service's /healthz (at HTTP_HOST:HTTP_PORT); exit 0 when it is healthy, 1 otherwise. For
    container health checks (Docker, Podman, Kubernetes exec probes): no curl needed in the image."""
    import json
    import urllib.error
    import urllib.request

    settings = startup()
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(settings.http_host, settings.http_host)  # noqa: S104
    url = f"http://{f'[{host}]' if ':' in host else host}:{settings.http_port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=HEALTH_TIMEOUT) as response:
            body = response.read()
    except urllib.error.HTTPError as error:  # 503: a check failed; its body says which
        raise failure(f"unhealthy (HTTP {error.code}): {error.read().decode(errors='replace').strip()}") from None
    except (OSError, ValueError) as error:
        raise failure(f"no answer from {url}: {error}") from None
    typer.echo(f"healthy: {json.dumps(json.loads(body).get('checks', {}))}")


@cli.command()
def jobs(
    failed: Annotated[int, typer.Option(min=0, max=500, help="How many recent failed jobs to list.")] = 10,
) -> None:
    """Show the job queue (JOB_QUEUE=procrastinate): waiting, running and failed jobs, and the workers."""
    settings = startup()
    if not settings.scaled_out:
        typer.echo(
            "There is no job queue: JOB_QUEUE is embedded, so `lookout run` runs monitors itself. "
            "Set JOB_QUEUE=procrastinate with a PostgreSQL DATABASE_URL to share the work between processes."
        )
        return
    from app.jobqueue import print_queue

    try:
        asyncio.run(print_queue(settings, failed_limit=failed, echo=typer.echo))
    except Exception as exc:  # the database is unreachable or not migrated
        raise failure(
            f"Could not read the job queue: {exc} (is the database up, and `lookout db upgrade` run?)"
        ) from None


@cli.command()
def chat() -> None:
    """Chat with Lookout in this terminal: commands, questions, and your monitors' digests while it runs."""
    settings = startup()
    import sys

    log_path = settings.data_dir / "lookout-chat.log"
    # Log lines would break into the conversation: they go to the file named here (set before the imports
    # below, which already log).
    configure_logging(level=settings.log_level, secrets=settings.secret_values(), file=log_path)
    no_model = settings.llm_unavailable_reason()
    model_line = f"Model: {settings.llm_model}."
    if no_model:  # two lines: each fits a terminal
        model_line = f"No language model: {no_model}.\nCommands work without one."
    # Said before the imports and the database start-up, which take a few seconds on a small machine.
    typer.echo("Lookout in your terminal: ask anything or type a command — /help lists them; Ctrl-D or /quit leaves.")
    typer.echo(f"{model_line} Log: {log_path}")
    from app.assembly import terminal_session
    from bots import TERMINAL_CHAT_ID, run_terminal_chat
    from research import chat_folder

    try:
        run_terminal_chat(
            terminal_session(settings),
            stdin=sys.stdin,
            stdout=sys.stdout,
            exports_dir=settings.exports_dir / chat_folder("terminal", TERMINAL_CHAT_ID),
            user=_terminal_user(),
            history_file=settings.data_dir / "chat_history",
        )
    except KeyboardInterrupt:
        raise typer.Exit(code=130) from None
    except Exception as exc:  # the session could not open (database unreachable, ...)
        logging.getLogger(__name__).exception("the terminal chat failed")
        raise failure(f"Lookout could not run the chat: {exc} (details in {log_path})") from None


def _terminal_user() -> str:
    """The person at the terminal, by their OS login name (their user id in the terminal chat)."""
    import getpass

    try:
        return getpass.getuser() or "terminal"
    except Exception:  # no login name in some containers
        return "terminal"


@cli.command()
def research(
    query: Annotated[str, typer.Argument(help='What to look for, e.g. "DeepSeek R2".')],
    limit: Annotated[int, typer.Option(min=1, max=200, help="How many stories to print.")] = 20,
    sources: SourcesOption = None,
) -> None:
    """Search the sources once and print the ranked, de-duplicated items."""
    if not query.strip():
        raise failure('Give something to look for, e.g. lookout research "DeepSeek R2".', code=2)
    settings = startup()
    from app.research_commands import research_command

    research_command(settings, query=query, limit=limit, sources_spec=sources)


@cli.command()
def collect(
    request: Annotated[str, typer.Argument(help='What to collect, e.g. "posts about open source LLMs".')],
    target: Annotated[
        int, typer.Option(min=1, max=MAX_COLLECTION_TARGET, help="Unique items to reach.")
    ] = CollectionGoal.target,
    max_attempts: Annotated[
        int, typer.Option(min=1, max=50, help="Collection rounds at most.")
    ] = CollectionGoal.max_attempts,
    items_per_attempt: Annotated[
        int, typer.Option(min=10, max=5000, help="Items asked for per round.")
    ] = CollectionGoal.items_per_attempt,
    sources: SourcesOption = None,
) -> None:
    """Collect until the target of unique items (or a stop rule); write CSV and JSON under DATA_DIR/exports/cli."""
    if not request.strip():
        raise failure('Say what to collect, e.g. lookout collect "posts about open source LLMs".', code=2)
    settings = startup()
    from app.research_commands import collect_command

    collect_command(
        settings,
        request=request,
        goal=CollectionGoal(target=target, max_attempts=max_attempts, items_per_attempt=items_per_attempt),
        sources_spec=sources,
    )


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="lookout")


if __name__ == "__main__":
    main()
