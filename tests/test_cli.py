"""The CLI as a user runs it: `lifebot chat`, `serve`, `doctor`, `pairing`, `users`.

Commands run in-process (tests/support/cli.py); one smoke test spawns the real `lifebot`.
"""

from __future__ import annotations

from pathlib import Path

from tests.fakes.llm import FakeLLM, call, say
from tests.support.cli import llm_env, run_cli, run_lifebot


async def test_chat_console_streams_answers_and_uses_tools(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    fake_llm.add(
        say("Hello, owner!"),
        call("create_task", {"title": "file taxes"}),
        say("Task added: file taxes."),
    )
    code, out, err = await run_cli(
        "chat",
        cwd=tmp_path,
        env=llm_env(fake_llm, tmp_path),
        stdin="hi\nadd a task to file taxes\n/tasks\n",
    )
    assert code == 0, err
    assert "lifebot> Hello, owner!" in out
    assert "(Adding the task…)" in out
    assert "lifebot> Task added: file taxes." in out
    assert "#1 file taxes" in out


async def test_serve_without_channels_or_llm_starts_the_console_with_clear_words(
    tmp_path: Path,
) -> None:
    # The smoke test: the installed entry point, as a real process with a real stdin.
    code, out, err = await run_lifebot(
        "serve",
        cwd=tmp_path,
        env={"LIFEBOT_DATA_DIR": str(tmp_path / "d"), "LIFEBOT_WEB_PORT": "0"},
        stdin="hello\n/remember I like tea\n/facts\n/quit\n",
    )
    assert code == 0, err
    assert "No language model is configured" in out
    assert "no language model is configured" in out  # the chat reply itself says so too
    assert "#1 I like tea" in out
    assert (tmp_path / "d" / "lifebot.db").exists()


async def test_bad_settings_name_the_setting_and_the_fix(tmp_path: Path) -> None:
    code, _, err = await run_cli(
        "serve",
        cwd=tmp_path,
        env={
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_APP_TOKEN": "nope",
            "LIFEBOT_TIMEZONE": "Nowhere/Land",
        },
    )
    assert code == 2
    assert (
        "SLACK_APP_TOKEN must start with xapp-: create an app-level token with connections:write"
        in err
    )
    assert "LIFEBOT_TIMEZONE='Nowhere/Land' is not an IANA time zone" in err


async def test_dotenv_file_is_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LIFEBOT_LLM_TIMEOUT=-5\n")
    code, _, err = await run_cli(
        "users", cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(tmp_path / "d")}
    )
    assert code == 2
    assert "LIFEBOT_LLM_TIMEOUT" in err


async def test_pairing_approve_from_the_cli(tmp_path: Path) -> None:
    from bot.app.build import build_app, start_app
    from tests.fakes.channel import RecordingChannel
    from tests.support.app import make_settings
    from tests.support.builders import make_inbound

    settings = make_settings(tmp_path)
    application = build_app(settings)
    await start_app(application)
    ch = RecordingChannel("fake")
    application.dispatcher.register(ch)
    await application.dispatcher.handle(make_inbound("hi", sender="newbie"))
    code_text = ch.texts()[0].split("pairing code is ")[1].split()[0]
    await application.close()

    env = {"LIFEBOT_DATA_DIR": str(settings.data_dir)}
    code, out, _ = await run_cli("pairing", "list", cwd=tmp_path, env=env)
    assert code == 0
    assert code_text in out
    code, out, _ = await run_cli("pairing", "approve", code_text, cwd=tmp_path, env=env)
    assert code == 0
    assert "Approved newbie on fake" in out
    code, out, err = await run_cli("pairing", "approve", code_text, cwd=tmp_path, env=env)
    assert code == 1
    assert "not a pending pairing code" in err
    code, out, _ = await run_cli("users", cwd=tmp_path, env=env)
    assert "newbie owner" in out  # the first approved person becomes the owner
    assert "tz=UTC  briefing 07:30  quiet 22:00-07:00" in out
    assert "fake:newbie" in out


async def test_doctor_reports_what_is_fine_and_what_to_fix(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    code, out, _ = await run_cli(
        "doctor", cwd=tmp_path, env={"LIFEBOT_DATA_DIR": str(tmp_path / "d")}
    )
    assert code == 1
    assert "database: ok" in out
    assert "language model: PROBLEM - not configured" in out
    assert "fix: set OPENAI_API_KEY" in out

    env = llm_env(fake_llm, tmp_path) | {
        "LIFEBOT_LLM_MODEL": "fake-smart",
        "LIFEBOT_LLM_FAST_MODEL": "fake-smart",
    }
    fake_llm.add(call("get_time_in", {"city": "Lisbon"}))  # doctor asks for one tool call
    code, out, _ = await run_cli("doctor", cwd=tmp_path, env=env)
    assert "language model: ok" in out

    env["LIFEBOT_LLM_MODEL"] = "gpt-missing"
    code, out, _ = await run_cli("doctor", cwd=tmp_path, env=env)
    assert code == 1
    assert "does not list gpt-missing" in out


async def test_one_local_model_setting_is_enough_for_the_doctor(
    fake_llm: FakeLLM, tmp_path: Path
) -> None:
    # README "Run it with a local model": OPENAI_BASE_URL and LIFEBOT_LLM_MODEL, nothing else.
    # The server serves one model; the fast model must follow it, not stay gpt-4o-mini.
    env = {
        "OPENAI_BASE_URL": fake_llm.url,
        "LIFEBOT_LLM_MODEL": "fake-smart",
        "LIFEBOT_DATA_DIR": str(tmp_path / "d"),
    }
    fake_llm.add(call("get_time_in", {"city": "Lisbon"}))
    _, out, _ = await run_cli("doctor", cwd=tmp_path, env=env)
    assert "language model: ok" in out, out
    assert "fake-smart / fake-smart" in out
    assert "does not list" not in out


async def test_the_readme_in_order_chats_as_alice_and_finds_what_she_remembered(
    tmp_path: Path,
) -> None:
    # `make serve` first (the console makes an "owner"), then the README's alice steps.
    env = {"LIFEBOT_DATA_DIR": str(tmp_path / "d")}
    code, _, err = await run_cli("chat", cwd=tmp_path, env=env, stdin="/quit\n")
    assert code == 0, err
    code, out, err = await run_cli(
        "users", "add", "alice", "--timezone", "Europe/Lisbon", cwd=tmp_path, env=env
    )
    assert code == 0, err
    code, out, err = await run_cli(
        "chat",
        "--user",
        "alice",
        cwd=tmp_path,
        env=env,
        stdin="/remember my bike is a red Brompton\n/facts\n/quit\n",
    )
    assert code == 0, err
    assert "my bike is a red Brompton" in out
    code, out, _ = await run_cli(
        "memory", "search", "bike", "--user", "alice", cwd=tmp_path, env=env
    )
    assert "my bike is a red Brompton" in out
    # The next `lifebot chat` goes on as alice without --user.
    _, out, _ = await run_cli("chat", cwd=tmp_path, env=env, stdin="/facts\n/quit\n")
    assert "my bike is a red Brompton" in out
    _, out, _ = await run_cli(
        "memory", "search", "unicorn", "--user", "alice", cwd=tmp_path, env=env
    )
    assert "Nothing in alice's memory matches 'unicorn'." in out
    assert "searched: message, image, document, fact" in out
    assert "--kinds message,image,document,fact,episode,journal searches everything" in out
