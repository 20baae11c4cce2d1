"""``lifebot jobs``, ``lifebot briefing preview``, ``lifebot calendar export``."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.runtime import MAX_ID, find_user, group

if TYPE_CHECKING:
    from bot.app.build import App

briefing_app = group("Morning briefings.")
calendar_app = group("lifebot's calendar.")

UserOption = Annotated[str, typer.Option("--user", "-u", help="User id or display name")]


def register_jobs_cli(app: typer.Typer) -> None:
    """Add the jobs commands to the ``lifebot`` CLI (one call from bot/cli.py)."""
    jobs_app = typer.Typer(
        help="Scheduled jobs and the outbox of pushes.",
        add_completion=False,
        rich_markup_mode=None,
        invoke_without_command=True,
    )
    jobs_app.callback()(jobs)
    jobs_app.command("retry")(retry)
    app.add_typer(jobs_app, name="jobs")
    app.add_typer(briefing_app, name="briefing")
    app.add_typer(calendar_app, name="calendar")


def _run(fn: object) -> None:
    from bot.app.cli.runtime import run_with_app

    run_with_app(fn)  # type: ignore[arg-type]  # each caller passes an App -> Awaitable


def _when(ts: datetime | float | None) -> str:
    if ts is None:
        return "-"
    if isinstance(ts, float | int):
        ts = datetime.fromtimestamp(ts, UTC)
    return f"{ts.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


async def _leader(application: App) -> str:
    from storage.repos.job_state import JobStateRepo

    db = application.db
    async with db.session() as s:
        lease = await JobStateRepo(s).lease("scheduler")
    now = application.clock.now()
    if lease is None or lease.expires_at < now:
        return "leader: none (no `lifebot serve` is running the jobs)"
    host, _, rest = lease.holder.partition(":")
    pid = rest.split(":", 1)[0]
    return (
        f"leader: host {host}, pid {pid} (lease {lease.holder}, term {lease.token}, "
        f"renewed {_when(lease.heartbeat_at)}, until {_when(lease.expires_at)} UTC)"
    )


def jobs(ctx: typer.Context) -> None:
    """List scheduled jobs, their next run times and last results, and the outbox."""
    if ctx.invoked_subcommand is not None:
        return
    from bot.agent.memory.extraction import MAX_SUMMARY_TRIES
    from storage.repos.episodes import EpisodeRepo
    from storage.repos.job_state import JobStateRepo
    from storage.repos.outbox import OutboxRepo

    async def go(application: App) -> None:
        service = application.jobs.service
        typer.echo(await _leader(application))
        async with application.db.session() as s:
            next_runs = await JobStateRepo(s).next_runs()
            states = await JobStateRepo(s).all()
            counts = await OutboxRepo(s).counts()
            problems = await OutboxRepo(s).problems(limit=5)
            waiting = await OutboxRepo(s).waiting(limit=5)
            fell_back = await OutboxRepo(s).fell_back(limit=5)
        typer.echo(
            f"{'JOB':<18} {'EVERY':>6}  {'NEXT RUN (UTC)':<19}  {'LAST RUN (UTC)':<19}  RESULT"
        )
        for job_id, spec in service.jobs.items():
            st = states.get(job_id)
            result = (st.last_error or st.last_result) if st else "never ran"
            typer.echo(
                f"{job_id:<18} {spec.every:>5.0f}s  {_when(next_runs.get(job_id)):<19}  "
                f"{_when(st.last_run_at if st else None):<19}  {result}"
            )
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "empty"
        typer.echo(f"outbox: {summary}")
        for d in problems:
            typer.echo(f"  #{d.id} {d.kind} user {d.user_id} {d.status}: {d.last_error or ''}")
        for d in waiting:
            typer.echo(f"  #{d.id} {d.kind} user {d.user_id} pending: {d.last_error or ''}")
        for d in fell_back:
            typer.echo(f"  #{d.id} {d.kind} user {d.user_id} delivered, {d.last_error or ''}")
        async with application.db.session() as s:
            gave_up = await EpisodeRepo(s).given_up(MAX_SUMMARY_TRIES)
        if gave_up:
            typer.echo(
                f"memory: {gave_up} episode summaries given up after {MAX_SUMMARY_TRIES} "
                "unusable answers from the model (they keep a plain stand-in summary)"
            )

    _run(go)


@briefing_app.command("preview")
def preview(user: UserOption) -> None:
    """Print the briefing a user would get now (nothing is sent)."""

    async def go(application: App) -> None:
        found = await find_user(application, user)  # by name or id, as everywhere
        briefings = application.jobs.briefings
        body, by_llm = await briefings.compose(found, application.clock.now())
        typer.echo(body)
        how = "written by the LLM" if by_llm else "deterministic: the LLM was not available"
        typer.echo(f"\n({how})", err=True)

    _run(go)


@calendar_app.command("export")
def export(
    user: UserOption,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="ICS file to write; '-' for stdout")
    ] = None,
) -> None:
    """Write a user's calendar as an ICS file any calendar app can import."""
    from bot.clock import zone
    from bot.jobs.calendars.events import to_ics
    from storage.repos.calendar import CalendarRepo

    async def go(application: App) -> None:
        found = await find_user(application, user)  # by name or id, as everywhere
        assert found.id is not None
        async with application.db.session() as s:
            events = await CalendarRepo(s).all_events(found.id)
        ics = to_ics(
            events,
            name=f"lifebot: {found.display_name}",
            now=application.clock.now(),
            tz=zone(found.timezone),
        )
        if out is not None and str(out) == "-":
            typer.echo(ics, nl=False)
            return
        safe = re.sub(r"[^\w.-]+", "_", found.display_name or str(found.id))
        target = out or Path(f"lifebot-{safe}.ics")
        target.write_text(ics, encoding="utf-8", newline="")
        typer.echo(f"Wrote {len(events)} event(s) to {target}")

    _run(go)


@calendar_app.command("import")
def import_ics(
    file: Annotated[Path, typer.Argument(help="An .ics file (exported from any calendar app)")],
    user: UserOption,
) -> None:
    """Load events from an ICS file into a user's calendar (again: updates, never doubles)."""
    from bot.errors import CalendarError
    from bot.jobs.calendars.own import counts_words

    async def go(application: App) -> None:
        found = await find_user(application, user)  # by name or id, as everywhere
        try:
            data = file.read_bytes()
        except OSError as exc:
            typer.echo(f"Cannot read {file}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from exc
        try:
            counts = await application.jobs.calendars.import_file(found, data)
        except CalendarError as exc:
            typer.echo(f"Nothing imported from {file}: {exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(f"Imported {file} for {found.display_name}: {counts_words(counts)}")

    _run(go)


@calendar_app.command("key")
def calendar_key() -> None:
    """Print a new LIFEBOT_CALENDAR_KEY (seals CalDAV passwords; keep it with your backups)."""
    from bot.jobs.calendars.caldav import new_key

    typer.echo(f"LIFEBOT_CALENDAR_KEY={new_key()}")


@calendar_app.command("caldav")
def caldav_add(
    url: Annotated[str, typer.Argument(help="The calendar's CalDAV URL (or the server's)")],
    user: UserOption,
    username: Annotated[str, typer.Option("--username", help="CalDAV user name")],
    password: Annotated[
        str | None,
        typer.Option("--password", help="CalDAV password (asked if absent, once the rest is ok)"),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="What to call it")] = None,
) -> None:
    """Link a user's CalDAV calendar: its events are read, accepted proposals written to it."""
    from bot.errors import CalendarError

    async def go(application: App) -> None:
        found = await find_user(application, user)  # by name or id, as everywhere
        calendars = application.jobs.calendars
        try:
            # Refused before the password is typed: an unknown user or a missing key is known now.
            calendars.secrets.seal("")
            secret = password if password is not None else typer.prompt("Password", hide_input=True)
            said = await calendars.add_caldav(found, url, username, secret, name)
        except CalendarError as exc:
            typer.echo(f"Not linked: {exc}", err=True)
            raise typer.Exit(1) from exc
        typer.echo(said)

    _run(go)


RETRYABLE = ("failed", "skipped")


def retry(
    delivery_id: Annotated[
        int, typer.Argument(help="The outbox id `lifebot jobs` shows (#N)", min=1, max=MAX_ID)
    ],
    force: Annotated[
        bool,
        typer.Option("--force", help="Also re-send an 'uncertain' push (it may then arrive twice)"),
    ] = False,
) -> None:
    """Send a failed or skipped push again (the running `lifebot serve` sends it)."""
    from storage.repos.outbox import OutboxRepo

    async def go(application: App) -> None:
        states = (*RETRYABLE, "uncertain") if force else RETRYABLE
        async with application.db.session() as s:
            repo = OutboxRepo(s)
            row = await repo.get(delivery_id)
            if row is None:
                typer.echo(
                    f"There is no push #{delivery_id} (`lifebot jobs` lists them).", err=True
                )
                raise typer.Exit(1)
            if row.status == "uncertain" and not force:
                typer.echo(
                    f"#{delivery_id} may have arrived already (its channel did not confirm); "
                    "add --force to send it again anyway.",
                    err=True,
                )
                raise typer.Exit(1)
            if not await repo.requeue(delivery_id, application.clock.now(), states=states):
                typer.echo(
                    f"#{delivery_id} is {row.status}: only a failed or skipped push is retried.",
                    err=True,
                )
                raise typer.Exit(1)
        typer.echo(
            f"#{delivery_id} ({row.kind} for user {row.user_id}) is queued again; the running "
            "`lifebot serve` (or `lifebot chat`) sends it within seconds."
        )

    _run(go)
