"""``lifebot memory ...`` and ``lifebot import``: search, status, facts, forget, reindex, import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from zoneinfo import ZoneInfo

import typer

from bot.app.cli.runtime import MAX_ID, group, run_with_app, run_with_memory
from bot.app.cli.runtime import find_user as _user

if TYPE_CHECKING:
    from rich.progress import Progress

    from bot.app.build import App
    from bot.app.memory_root import MemoryApp

memory_app = group("Search and manage what lifebot remembers.")

UserOpt = Annotated[str, typer.Option("--user", "-u", help="User id or display name")]


def register_memory_cli(app: typer.Typer) -> None:
    """Add ``memory ...`` and ``import`` to the lifebot CLI."""
    app.add_typer(memory_app, name="memory")
    app.command("import")(import_command)


def _progress(label: str) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

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
        str,
        typer.Option(
            "--kinds", help="Comma-separated: message, image, document, episode, fact, journal"
        ),
    ] = "message,image,document,fact",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list")] = False,
) -> None:
    """Ranked hits with their source ids, times and scores.

    It searches what was said, pictures, documents and facts; --kinds widens to episodes and
    the journal.
    """
    wanted = tuple(k.strip() for k in kinds.split(",") if k.strip())
    known = ("message", "image", "document", "episode", "fact", "journal")
    if not wanted or any(k not in known for k in wanted):
        typer.echo(f"--kinds takes {', '.join(known)}, comma-separated", err=True)
        raise typer.Exit(2)

    async def go(app: MemoryApp) -> None:
        from bot.agent.memory.service import MemoryService
        from bot.agent.sources import source_ids

        who = await _user(app, user)
        memory: MemoryService = app.memory
        # New messages become searchable by their words now; their vectors are the background
        # task's job (a cold command does not embed a backlog first: `memory status`).
        await memory.index_pending(who.id, embed=False)
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
            # out.note is written for the model ("do not guess"): a person gets plain words.
            print(f"Nothing in {who.display_name}'s memory matches {query!r}.")
            left = [k for k in known if k not in wanted]
            print(
                f"(searched: {', '.join(wanted)}"
                + (f"; --kinds {','.join([*wanted, *left])} searches everything" if left else "")
                + "; new messages are found by their words at once, by meaning once "
                "`lifebot memory status` shows no vectors waiting)"
            )
            return
        for n, ev in enumerate(out.evidence, 1):
            when = ev.item.ts.astimezone(tz)
            where = ev.item.channel or ev.item.kind
            print(f"{n:>2}. {when:%a %d %b %Y %H:%M} ({where}, [{ev.item.ref or ev.item.id}])")
            print(f"    {ev.item.text}")
            if "sources" in hits[n - 1]:
                ids = hits[n - 1]["sources"]
                assert isinstance(ids, list)
                print(f"    from messages: {', '.join(map(str, ids)) or '-'}")
        print(f"(times in {who.timezone}; --json adds scores)")

    run_with_memory(go, embeds=True)


@memory_app.command("status")
def status(
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user")] = None,
) -> None:
    """What is searchable, and what still waits: messages to index, items without vectors."""

    async def go(app: MemoryApp) -> None:
        who = await _user(app, user) if user else None
        waiting = await app.memory.index.waiting(who.id if who else None)
        whose = f"{who.display_name}'s memory" if who else "Memory (all users)"
        print(f"{whose}, vectors of {waiting.model}:")
        for kind, (total, missing) in sorted(waiting.kinds.items()):
            line = f"  {kind}: {total} indexed"
            if missing:
                line += f", {missing} waiting for vectors (found by their words until then)"
            print(line)
        if not waiting.kinds:
            print("  nothing indexed yet")
        if waiting.unindexed:
            print(f"  {waiting.unindexed} messages not indexed yet (not searchable yet)")
        if waiting.unindexed or waiting.without_vectors:
            print(
                "`lifebot serve` finishes this in the background, in batches; "
                "`lifebot memory reindex` does it now."
            )
        else:
            print("Everything is searchable by words and by meaning.")

    run_with_memory(go)


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


@memory_app.command("file")
def memory_file(
    user: UserOpt,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write MEMORY.md here (default: print)")
    ] = None,
    apply_file: Annotated[
        Path | None,
        typer.Option("--apply", help="Read an edited MEMORY.md back: add, change and forget"),
    ] = None,
) -> None:
    """A user's facts and rules as MEMORY.md, or an edited copy read back (--apply FILE)."""
    if out is not None and apply_file is not None:
        typer.echo("Give --out (write the file) or --apply (read one back), not both.", err=True)
        raise typer.Exit(2)

    async def go(app: App) -> None:
        from bot.agent.memory.memory_file import (
            MemoryFileError,
            apply_text,
            read_file,
            write_for,
        )

        who = await _user(app, user)
        keeper = app.memory.keeper
        if apply_file is None:
            text = await write_for(keeper, who.id or 0, who.display_name, app.clock.now())
            if out is None:
                print(text)
                return
            out.write_text(text, encoding="utf-8")
            out.chmod(0o600)  # what a person's memory says is private
            print(f"Wrote {out} ({text.count(chr(10) + '- ')} facts and rules).")
            return
        try:
            edited = read_file(apply_file)
            report = await apply_text(keeper, who.id or 0, edited, app.clock.now())
        except (OSError, UnicodeDecodeError, MemoryFileError) as exc:
            typer.echo(f"error: cannot read {apply_file}: {exc}", err=True)
            raise typer.Exit(1) from exc
        print(report.describe())
        if report.conflicts:
            raise typer.Exit(3)  # applied the rest; the conflicts need the person

    run_with_app(go)


@memory_app.command("forget")
def forget(
    fact_id: Annotated[
        int, typer.Argument(help="The fact id from `memory facts`", min=1, max=MAX_ID)
    ],
) -> None:
    """Forget a fact; it will not be extracted again."""

    async def go(app: App) -> None:
        from storage.repos.facts import FactRepo

        async with app.db.session() as s:
            row = await FactRepo(s).get(fact_id)
        if row is None or row.forgotten_at is not None:
            typer.echo(f"There is no fact #{fact_id}.", err=True)
            raise typer.Exit(1)
        await app.memory.keeper.forget(row.user_id, fact_id, app.clock.now())
        print(f"Forgotten #{fact_id}: {row.text}")

    run_with_app(go)


@memory_app.command("reindex")
def reindex(
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user")] = None,
    images: Annotated[
        bool,
        typer.Option("--images", help="Also describe stored photos (needs LIFEBOT_VISION=true)"),
    ] = False,
) -> None:
    """Index anything missing and embed everything again (after changing the model)."""

    async def go(app: App) -> None:
        who = await _user(app, user) if user else None
        memory = app.memory
        if images:
            if not app.photos.vision:
                print(
                    "Photos stay undescribed: the smart model is not marked as a vision model "
                    "(set LIFEBOT_VISION=true with a model that accepts images)."
                )
                raise typer.Exit(1)
            with _progress("photos") as bar:
                task = bar.add_task("photos", total=None)
                described = await app.photos.describe_pending(
                    who.id if who else None, progress=lambda n: bar.advance(task, n)
                )
            print(f"Described {described} message(s) with photos.")
        await memory.index.index_pending(user_id=who.id if who else None)
        total = await memory.index.size(who.id if who else None)
        with _progress("embedding") as bar:
            task = bar.add_task("index", total=total)
            count = await memory.index.reindex(
                user_id=who.id if who else None, progress=lambda n: bar.advance(task, n)
            )
        print(f"Embedded {count} items with {memory.index.embedder.model_id}.")

    run_with_app(go)


def import_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="A `lifebot export` zip, JSON Lines or Telegram result.json; or the word "
            "journal or location"
        ),
    ],
    folder: Annotated[
        Path | None,
        typer.Argument(
            help="With `journal`: the folder of dated journal files; with `location`: a GPX, "
            "OwnTracks Recorder .rec or Google Timeline file"
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", help="User id or name (chat history and journals)"),
    ] = None,
    as_name: Annotated[
        str | None,
        typer.Option(
            "--as", help="A `lifebot export`: the person's name here (one is already taken)"
        ),
    ] = None,
) -> None:
    """Import a `lifebot export` zip, chat history (JSON Lines, Telegram export) or a journal.

    `lifebot import journal DIR --user U` imports a folder of dated journal files;
    `lifebot import location FILE --user U` a location history (GPX, OwnTracks, Google).
    """
    from storage.portable import is_export

    if str(file) == "location":
        if folder is None or user is None:
            typer.echo("usage: lifebot import location FILE --user U", err=True)
            raise typer.Exit(2)
        from bot.app.cli.location import import_location

        import_location(folder, user)
        return
    if folder is not None:
        if str(file) != "journal" or user is None:
            typer.echo("usage: lifebot import journal DIR --user U", err=True)
            raise typer.Exit(2)
        from bot.app.cli.journal import import_journal

        import_journal(folder, user)
        return

    if file.is_file() and is_export(file):
        if user is not None:  # it would be ignored: the export's person comes back, not U
            typer.echo(
                f"{file} is a `lifebot export`: it brings back its own user, as a new user "
                "here; leave out --user (it cannot go into another user; --as NAME names them).",
                err=True,
            )
            raise typer.Exit(2)
        _import_export(file, as_name)
        return
    if as_name is not None:
        typer.echo("--as names the person of a `lifebot export` zip only.", err=True)
        raise typer.Exit(2)
    if user is None:
        typer.echo(
            "Chat history needs --user (an id or name; `lifebot users` lists them).", err=True
        )
        raise typer.Exit(2)
    _import_history(file, user)


def _count(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


_SHOWN = (
    ("message", "message"),
    ("fact", "fact"),
    ("episode", "episode"),
    ("journalentry", "journal entry"),
    ("calendarevent", "event"),
    ("reminder", "reminder"),
    ("contact", "contact"),
    ("place", "place"),
)
"""Tables the import's summary names (the rest are counted in "rows in all")."""


def _imported_line(name: str, user_id: int, old: int | None, rows: dict[str, int]) -> str:
    """``Imported ana as user 7 (was 3): 120 messages, 4 facts, ...``."""
    was = f" (was {old})" if old is not None else ""
    parts = [_count(rows[t], noun) for t, noun in _SHOWN if rows.get(t)]
    return f"Imported {name} as user {user_id}{was}: {', '.join(parts) or 'no messages'}."


def _import_export(file: Path, name: str | None) -> None:
    from storage.portable import ExportFileError

    async def go(app: App) -> None:
        try:
            done = await app.userdata.import_(file, name=name)
        except ExportFileError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from exc
        print(_imported_line(done.name, done.user_id, done.old_user_id, done.rows))
        files = sum(done.files.values())
        rows = sum(done.rows.values())
        print(
            f"{_count(rows, 'row')} in all, {_count(files, 'stored file')}, "
            f"{_count(done.audio_files, 'audio file')}; every id is new, and every reference "
            "to one points at the new row."
        )

    run_with_app(go)


def _import_history(file: Path, user: str) -> None:
    async def go(app: App) -> None:
        from bot.app.importer import import_file, read_records
        from bot.errors import ImportFileError

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
        for problem in report.problems():
            typer.echo(problem, err=True)
        if report.added:
            with _progress("indexing") as bar:
                task = bar.add_task("index", total=report.added)
                await app.memory.after_import(
                    who.id or 0,
                    report.conversations,
                    progress=lambda n: bar.advance(task, n),
                    embed=False,
                )
        else:  # nothing new (a file imported again): no empty "0/?" bar
            await app.memory.after_import(
                who.id or 0, report.conversations, progress=lambda _n: None, embed=False
            )
        skipped = f", {report.skipped} not text (skipped)" if report.skipped else ""
        print(
            f"{report.file}: {_count(report.lines, 'record')}: {report.read} read, "
            f"{len(report.cleaned)} cleaned, {len(report.bad)} refused{skipped}. "
            f"Imported {_count(report.added, 'message')} ({report.duplicates} already there); "
            "searchable by their words now."
        )
        # Vectors last, in committed batches: stopping here (Ctrl-C) loses nothing, and
        # `lifebot memory status` shows what waits for `lifebot serve` to finish.
        waiting = (await app.memory.index.waiting(who.id)).without_vectors
        if waiting:
            with _progress("vectors") as bar:
                task = bar.add_task("embed", total=waiting)
                await app.memory.index.embed_missing(
                    who.id, progress=lambda n: bar.advance(task, n)
                )

    run_with_app(go)
