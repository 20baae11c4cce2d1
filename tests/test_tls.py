"""HTTPS to the model is verified: one TLS context per process is shared by every client
(bot/tls.py), and it still refuses a server nobody vouched for and trusts what
``SSL_CERT_FILE`` names, as each HTTP library's own default did."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.llm import FakeLLM, Step
from tests.support.cli import llm_env, run_lifebot
from tests.support.tls import loopback_certificate


async def test_the_model_over_https_is_refused_unless_its_certificate_is_trusted(
    tmp_path: Path,
) -> None:
    cert = loopback_certificate(tmp_path / "tls")
    fake = FakeLLM()
    fake.default = lambda _body: Step(text="Hello over TLS.")
    url = await fake.start(tls=cert.server_context())
    assert url.startswith("https://")
    try:
        env = {**llm_env(fake, tmp_path), "LIFEBOT_LLM_MAX_RETRIES": "0"}
        # A certificate no trusted authority signed: no word reaches the model.
        code, out, err = await run_lifebot("chat", cwd=tmp_path, env=env, stdin="hello\n/quit\n")
        assert code == 0, err
        assert "I can't reach my language model right now" in out, out
        assert "Hello over TLS." not in out
        assert fake.chat_requests == []
        # The owner trusts its authority (as for a model server inside a company network).
        trusted = {**env, "SSL_CERT_FILE": str(cert.ca_file)}
        code, out, err = await run_lifebot(
            "chat", cwd=tmp_path, env=trusted, stdin="hello again\n/quit\n"
        )
        assert code == 0, err
        assert "Hello over TLS." in out, out
        assert fake.chat_requests  # the words reached the model this time
    finally:
        await fake.stop()
