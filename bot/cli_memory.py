"""``lifebot memory ...`` and ``lifebot import``: search, facts, forget, reindex, import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from bot.cli import run_with_app
from bot.composition import App
from storage.models import User
from storage.repos.users import UserRepo

memory_app = typer.Typer(help="Search and manage what lifebot remembers.", no_args_is_help=True)

UserOpt = Annotated[str, typer.Option("--user", "-u", help="User id or display name")]


async def _user(app: App, who: str) -> User:
    async with app.db.session() as s:
        repo = UserRepo(s)
        if who.isdigit():
            user = await repo.get(int(who))
            if user is not None:
                return user
        matches = [u for u in await repo.all() if u.display_name.lower() == who.lower()]
    if len(matches) != 1:
        why = "no user" if not matches else "several users"
        typer.echo(f"{why} matches {who!r}; `lifebot users` lists them (use the id).", err=True)
        raise typer.Exit(2)
    return matches[0]


def _progress(label: str) -> Progress:
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        transient=False,
        console=None,
    )


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in words")],
    user: UserOpt,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=50)] = 10,
    kinds: Annotated[
        str, typer.Option("--kinds", help="Comma-separated: message, episode, fact")
    ] = "message",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list")] = False,
) -> None:
    """Ranked hits with their source ids, times and scores (messages unless --kinds widens)."""
    wanted = tuple(k.strip() for k in kinds.split(",") if k.strip())
    if not wanted or any(k not in ("message", "episode", "fact") for k in wanted):
        typer.echo("--kinds takes message, episode and/or fact, comma-separated", err=True)
        raise typer.Exit(2)

    async def go(app: App) -> None:
        from bot.agent.memory.service import MemoryService
        from bot.agent.memory.sources import source_ids

        who = await _user(app, user)
        memory: MemoryService = app.extras["memory"]
        await memory.index_pending(who.id)
        tz = ZoneInfo(who.timezone)
        out = await memory.retriever.search(
            who.id or 0, query, now=app.clock.now(), tz=tz, limit=limit, kinds=wanted
        )
        cited = await source_ids(app.db, who.id or 0, [ev.item for ev in out.evidence])
        hits = []
        for ev, sources in zip(out.evidence, cited, strict=True):
            hit: dict[str, object] = {
                "id": ev.item.ref,
                "ts": ev.item.ts.isoformat(),
                "text": ev.item.text,
                "score": round(ev.score, 5),
                "kind": ev.item.kind,
            }
            if ev.item.kind != "message":
                hit["sources"] = sources
            hits.append(hit)
        if as_json:
            print(json.dumps(hits, ensure_ascii=False, indent=2))
            return
        if not hits:
            print(out.note or "No results.")
            return
        for n, (hit, ev) in enumerate(zip(hits, out.evidence, strict=True), 1):
            when = ev.item.ts.astimezone(tz)
            print(f"{n:>2}. [{hit['id']}] {when:%Y-%m-%d %H:%M} {hit['kind']} "
                  f"score={hit['score']:.4f} ({ev.matched})")  # fmt: skip
            print(f"    {ev.item.text}")
            if "sources" in hit:
                print(f"    sources: {', '.join(map(str, hit['sources'])) or '-'}")  # type: ignore[call-overload]
        if out.note:
            print(f"note: {out.note}")

    run_with_app(go)


@memory_app.command("facts")
def facts(user: UserOpt) -> None:
    """List a user's current facts."""

    async def go(app: App) -> None:
        from storage.repos.facts import FactRepo

        who = await _user(app, user)
        async with app.db.session() as s:
            rows = await FactRepo(s).active(who.id or 0)
        if not rows:
            print("No facts yet.")
        for f in rows:
            print(f"#{f.id} [{f.category}] {f.text}  ({f.origin}, {f.updated_at:%Y-%m-%d})")

    run_with_app(go)


@memory_app.command("forget")
def forget(fact_id: Annotated[int, typer.Argument(help="The fact id from `memory facts`")]) -> None:
    """Forget a fact; it will not be extracted again."""

    async def go(app: App) -> None:
        from storage.models import Fact

        async with app.db.session() as s:
            row = await s.get(Fact, fact_id)
        if row is None or row.forgotten_at is not None:
            typer.echo(f"There is no fact #{fact_id}.", err=True)
            raise typer.Exit(1)
        fact = await app.extras["memory"].keeper.forget(row.user_id, fact_id, app.clock.now())
        print(f"Forgotten #{fact_id}: {fact.text}")

    run_with_app(go)


@memory_app.command("reindex")
def reindex(
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user")] = None,
) -> None:
    """Index anything missing and embed everything again (after changing the model)."""

    async def go(app: App) -> None:
        who = await _user(app, user) if user else None
        memory = app.extras["memory"]
        with _progress("indexing") as bar:
            task = bar.add_task("index", total=None)
            count = await memory.index.reindex(
                user_id=who.id if who else None, progress=lambda n: bar.advance(task, n)
            )
        print(f"Embedded {count} items with {memory.index.embedder.model_id}.")

    run_with_app(go)


def import_command(
    file: Annotated[Path, typer.Argument(help="JSON Lines file or Telegram result.json")],
    user: UserOpt,
) -> None:
    """Import chat history (JSON Lines or a Telegram Desktop export) into a user's memory."""

    async def go(app: App) -> None:
        from bot.importer import ImportFileError, import_file, read_records

        who = await _user(app, user)
        try:
            total = sum(1 for _ in read_records(file, ZoneInfo(who.timezone)))
            with _progress("importing") as bar:
                task = bar.add_task("import", total=total)
                report = await import_file(
                    app.db,
                    who.id or 0,
                    file,
                    timezone=who.timezone,
                    progress=lambda n: bar.advance(task, n),
                )
                bar.update(task, completed=total)
        except ImportFileError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        for where, why in report.bad:
            typer.echo(f"skipped {where}: {why}", err=True)
        with _progress("indexing") as bar:
            task = bar.add_task("index", total=report.added or None)
            await app.extras["memory"].after_import(
                who.id or 0, report.conversations, progress=lambda n: bar.advance(task, n)
            )
        print(
            f"Imported {report.added} messages ({report.duplicates} already there, "
            f"{len(report.bad)} bad lines skipped)."
        )

    run_with_app(go)
