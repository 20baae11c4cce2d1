"""The declarations of the voice devices: our pendant, Omi and Home Assistant (issue 28)."""

from __future__ import annotations

from bot.feature import Access, Feature, FileKind, Route, Secret

PENDANT = Feature(
    name="pendant",
    about="Voice devices on lifebot's own WebSocket protocol: ask, listen ambiently, hear back.",
    tables=("device", "devicesession", "audiosegment"),
    files=(FileKind("device-audio", "audio of pendant sessions, kept until transcribed"),),
    secrets=(Secret("device token", shape=r"(lbd_)[A-Za-z0-9_\-]{8,}"),),
    routes=(Route("/api/v1/devices", Access.BEARER), Route("/devices", Access.SESSION)),
)
"""The pendant's declaration."""

OMI = Feature(
    name="omi",
    about="Omi's cloud posts the wearer's audio and conversations; they become memory.",
    files=(
        FileKind(
            "omi-audio",
            "audio chunks Omi's backend posted, waiting to be transcribed",
            per_user=False,
        ),
    ),
    routes=(Route("/omi", Access.PATH_TOKEN, max_body=8 * 1024 * 1024),),
)
"""Omi's declaration (its device tokens are the pendant's)."""

WYOMING = Feature(
    name="wyoming",
    about="Home Assistant's voice pipelines over Wyoming: speech to text, text to speech, "
    "and lifebot as a conversation agent.",
)
"""Wyoming's declaration: it keeps nothing of its own (requests are messages)."""
