"""Location's declaration: points from phones, places, stays and the evening's proposals."""

from __future__ import annotations

from bot.feature import Access, Feature, Input, IntentWords, Reference, Route, Secret

FEATURE = Feature(
    name="location",
    about="Where the person has been: points from their phone become places and stays, and "
    "stays become proposed events each evening.",
    inputs=(Input.LOCATION,),
    tables=("locationpoint", "locationsetting", "place", "stay"),
    references=(Reference("delivery", "key", template="location-proposals:{user}:"),),
    secrets=(
        Secret(
            "location token",
            shape=r"(lbl_)[A-Za-z0-9_\-]{8,}",
            example="Your location token: lbl_d2hlcmUgYW0gST8gYXQgaG9tZQ",
        ),
    ),
    intents=(
        IntentWords(
            "location",
            r"\b(where (was|were|have) i|where did i go|been to|last visit|visited|"
            r"last time i was at)\b",
        ),
    ),
    tools=("where_was_i", "last_visit"),
    commands=("location", "place"),
    jobs=("location.proposals",),
    routes=(
        Route("/api/location", Access.HEADER_TOKEN, max_body=2 * 1024 * 1024),
        Route("/api/v1/places", Access.BEARER),
        Route("/places", Access.SESSION),
    ),
)
