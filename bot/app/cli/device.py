"""``lifebot device ...`` (add, revoke, status) and ``lifebot device-sim``."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.app.cli.runtime import group, settle_collector

if TYPE_CHECKING:
    from bot.app.build import App

device_app = group("Pair, revoke and check pendants.")


def register_device_cli(app: typer.Typer) -> None:
    """Add ``device add|revoke|status`` and ``device-sim`` to the lifebot CLI."""
    app.add_typer(device_app, name="device")
    app.command("device-sim")(device_sim)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _when(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC" if at else "never"


def _endpoint(app: App) -> str:
    s = app.settings
    return f"ws://{s.device_host}:{s.device_port}/v1/device"


@device_app.command("add")
def device_add(
    name: Annotated[str, typer.Argument(help="A unique name for the pendant, e.g. kitchen")],
    user: Annotated[str, typer.Option("--user", help="The user it records for (id or name)")],
) -> None:
    """Register a pendant and print its token (shown once; only a hash is stored)."""
    from bot.app.cli.runtime import find_user, run_with_app
    from storage.repos.devices import DeviceRepo

    if not _NAME.match(name):
        typer.echo("A device name is 1-64 letters, digits, '.', '_' or '-'.", err=True)
        raise typer.Exit(2)

    async def go(app: App) -> None:
        owner = await find_user(app, user)  # by id or name, as everywhere
        assert owner.id is not None
        async with app.db.session() as s:
            try:
                _, token = await DeviceRepo(s).add(owner.id, name)
            except ValueError as exc:
                typer.echo(str(exc), err=True)
                raise typer.Exit(1) from exc
        typer.echo(f"Added pendant {name} for {owner.display_name} (user {owner.id}).")
        typer.echo(f"Token (shown only now; store it on the device): {token}")
        typer.echo(f"Endpoint: {_endpoint(app)}  (header  Authorization: Bearer <token>)")
        typer.echo(
            f"Omi app, Realtime audio bytes URL: {app.settings.web_url}/omi/{token}  "
            '(must be reachable from the internet over HTTPS; see README "Use your Omi")'
        )
        typer.echo("`lifebot serve` now starts the pendant server.")

    run_with_app(go)


@device_app.command("revoke")
def device_revoke(name: Annotated[str, typer.Argument(help="The pendant's name")]) -> None:
    """Invalidate a pendant's token; its recordings and transcripts stay."""
    from bot.app.cli.runtime import run_with_app
    from storage.repos.devices import DeviceRepo

    async def go(app: App) -> None:
        async with app.db.session() as s:
            device = await DeviceRepo(s).revoke(name, app.clock.now())
        if device is None:
            typer.echo(f"No active pendant named {name!r}.", err=True)
            raise typer.Exit(1)
        typer.echo(
            f"Revoked {name}: new connections are refused now; a connected pendant is "
            "disconnected within 2 seconds. Its transcripts stay."
        )

    run_with_app(go)


@device_app.command("status")
def device_status() -> None:
    """Devices, when each was last seen, and audio still waiting to be transcribed."""
    from bot.app.cli.runtime import run_with_app
    from bot.device.spool import Spool
    from bot.device.spool_cap import spool_bytes
    from storage.repos.devices import DeviceRepo, SessionRepo
    from storage.repos.users import UserRepo

    async def go(app: App) -> None:
        spool = Spool(app.settings.data_dir / "spool")
        async with app.db.session() as s:
            devices = await DeviceRepo(s).all()
            sessions = await SessionRepo(s).all_sessions()
            names = {u.id: u.display_name for u in await UserRepo(s).all()}
            waiting: dict[int, tuple[int, float]] = {}
            for sess in sessions:
                count, samples = await SessionRepo(s).count_unfinished(sess.id)
                uncut = max(0, spool.samples(sess.id) - sess.vad_cursor)
                n, secs = waiting.get(sess.device_id, (0, 0.0))
                waiting[sess.device_id] = (n + count, secs + (samples + uncut) / 16000)
        # Omi chunks received but not yet in a session (16 kHz assumed for the estimate).
        for d in devices:
            inbox = await app.omi.waiting_bytes(d.id or 0)
            if inbox:
                n, secs = waiting.get(d.id or 0, (0, 0.0))
                waiting[d.id or 0] = (n, secs + inbox / 32000)
        if not devices:
            typer.echo("No pendants yet: `lifebot device add NAME --user USER` adds one.")
            return
        typer.echo(f"Endpoint: {_endpoint(app)}")
        # What the cap counts: the live spool, Omi's inbox and the audio kept in the store.
        kept = await app.files.total("device-audio")
        used = (spool_bytes(spool.root) + await app.omi.stored_bytes() + kept) / 1e6
        cap = app.settings.device_spool_max_mb
        typer.echo(f"Spool: {used:.1f} MB" + (f" of its {cap:g} MB cap" if cap else " (no cap)"))
        for d in devices:
            state = f"revoked {_when(d.revoked_at)}" if d.revoked_at else "active"
            if await app.omi.is_omi(d.id or 0):
                state += " (Omi)"
            n, secs = waiting.get(d.id or 0, (0, 0.0))
            typer.echo(
                f"{d.name}  user={names.get(d.user_id, d.user_id)}  {state}  "
                f"last seen {_when(d.last_seen_at)}  waiting: {secs:.1f} s of audio"
                f" ({n} utterances)"
            )

    run_with_app(go)


def device_sim(
    wav: Annotated[Path, typer.Argument(help="A 16-bit PCM WAV file (any rate 8-48 kHz)")],
    token: Annotated[str, typer.Option("--token", help="The pendant's token")],
    url: Annotated[str | None, typer.Option("--url", help="Default: from the settings")] = None,
    mode: Annotated[str, typer.Option("--mode", help="ask or ambient")] = "ask",
    realtime: Annotated[bool, typer.Option("--realtime", help="Pace audio like a mic")] = False,
    push_to_talk: Annotated[
        bool, typer.Option("--push-to-talk", help="Bracket the file with audio-start/stop")
    ] = False,
    wait: Annotated[
        float, typer.Option("--wait", help="Give up after this many seconds", min=0, max=3600)
    ] = 120,
) -> None:
    """Stream a WAV file to lifebot like a pendant and print what comes back."""
    from websockets.exceptions import ConnectionClosed, WebSocketException

    from bot.app.cli.runtime import settings_or_exit
    from bot.device.sim import DEFAULT_URL, describe, simulate

    if mode not in ("ask", "ambient"):
        typer.echo("--mode is ask or ambient.", err=True)
        raise typer.Exit(2)
    if not wav.is_file():
        typer.echo(f"No file at {wav}.", err=True)
        raise typer.Exit(2)
    if url is None:
        settings = settings_or_exit()
        url = f"ws://{settings.device_host}:{settings.device_port}/v1/device"
    target = url or DEFAULT_URL

    def show(frame: dict[str, object]) -> None:
        if frame.get("type") not in ("reply-delta", "pong"):
            typer.echo(describe(frame))

    try:
        settle_collector()
        result = asyncio.run(
            simulate(
                wav,
                token=token,
                url=target,
                mode=mode,
                realtime=realtime,
                push_to_talk=push_to_talk,
                wait_seconds=wait,
                printer=show,
            )
        )
    except ConnectionClosed as exc:
        # The server went away mid-stream (stopped, crashed, network): say so, no traceback.
        typer.echo(
            f"device-sim: the server at {target} closed the connection ({exc}); "
            "is `lifebot serve` still running?",
            err=True,
        )
        raise typer.Exit(1) from exc
    except (OSError, ValueError, TimeoutError, WebSocketException) as exc:
        typer.echo(f"device-sim: cannot talk to {target}: {exc}", err=True)
        raise typer.Exit(1) from exc
    if result.close_code not in (None, 1000):
        why = (result.close_reason or "").strip()
        if result.close_code == 1006:  # no close frame: the process or the network went away
            typer.echo(
                f"device-sim: the server at {target} closed the connection without a word "
                "(1006); is `lifebot serve` still running?",
                err=True,
            )
        else:
            typer.echo(
                f"device-sim: the server at {target} closed the connection: "
                f"{why or 'no reason given'} ({result.close_code})",
                err=True,
            )
        raise typer.Exit(1)
