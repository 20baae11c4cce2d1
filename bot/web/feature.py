"""The web room's declaration: sign-in, sessions, API tokens, pages and uploads (issue 28)."""

from __future__ import annotations

from bot.feature import Access, Feature, NotReference, Route, Secret

FEATURE = Feature(
    name="web",
    about="The web page and REST API: sign-in links, sessions, personal API tokens, the "
    "owner's page, uploads, export and delete-my-data.",
    tables=("apitoken", "webloginlink", "websession"),
    not_references=(NotReference("websession", "flash", "a notice for the next page"),),
    secrets=(
        Secret("web session key", setting="web_secret"),
        Secret(
            "personal API token",
            shape=r"(lbk_)[A-Za-z0-9_\-]{8,}",
            example="Authorization: Bearer lbk_YSBwZXJzb25hbCBhcGkgdG9rZW4",
        ),
        Secret(
            "sign-in link",
            shape=r"(/login/)[A-Za-z0-9_\-]{16,}",
            example="Open https://lifebot.example.test/login/c2lnbi1pbi1saW5rLXNlY3JldA to sign in",
        ),
    ),
    commands=("web",),
    routes=(
        Route("/healthz", Access.PUBLIC),
        Route("/readyz", Access.PUBLIC),
        Route("/metrics", Access.PUBLIC),
        Route("/static", Access.PUBLIC),
        Route("/api/openapi.json", Access.PUBLIC),
        Route("/api/docs", Access.PUBLIC),
        Route("/signin", Access.PUBLIC),
        Route("/login", Access.PUBLIC, max_body=4_000),
        Route("/login/{secret}", Access.PATH_TOKEN),
        Route("/signout", Access.SESSION),
        Route("/", Access.SESSION),
        Route("/questions", Access.SESSION),
        Route("/waiting", Access.SESSION),
        Route("/settings", Access.SESSION),
        Route("/export", Access.SESSION),
        Route("/delete", Access.SESSION),
        Route("/owner", Access.OWNER),
        Route("/upload", Access.SESSION, max_body_setting="image_max_bytes"),
        Route("/chat", Access.SESSION, max_body_setting="image_max_bytes"),
        Route("/zones", Access.SESSION),
        Route("/favicon.ico", Access.PUBLIC),
        Route("/api/v1/uploads", Access.BEARER, max_body_setting="image_max_bytes"),
        Route("/api/v1/me", Access.BEARER),
        Route("/api/v1/settings", Access.BEARER),
        Route("/api/v1/export", Access.BEARER),
        Route("/api/v1/tokens", Access.BEARER),
    ),
    metrics=(
        "lifebot_http_requests_total",
        "lifebot_http_request_seconds",
        "lifebot_http_refused_total",
    ),
)
