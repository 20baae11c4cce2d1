"""The declarations of the voice devices: our pendant, Omi and Home Assistant (issue 28)."""

from __future__ import annotations

from bot.feature import Access, Feature, FileKind, NotReference, Reference, Route, Secret

DEVICE_AUDIO = FileKind(
    "device-audio",
    "audio of finished pendant sessions kept with LIFEBOT_DEVICE_KEEP_AUDIO (live audio is in "
    "this host's spool until transcribed)",
)
"""Kept session audio, ``<user id>/<session id>.pcm``."""

PENDANT = Feature(
    name="pendant",
    about="Voice devices on lifebot's own WebSocket protocol: ask, listen ambiently, hear back.",
    tables=("device", "devicesession", "audiosegment"),
    references=(Reference("delivery", "key", template="spool-problem:{device}:"),),
    not_references=(NotReference("devicesession", "anchors", "sample offsets and times"),),
    files=(DEVICE_AUDIO,),
    secrets=(
        Secret(
            "device token",
            shape=r"(lbd_)[A-Za-z0-9_\-]{8,}",
            example="paired with lbd_Q2xhcmEncyBwZW5kYW50IGtleQ",
        ),
    ),
    routes=(Route("/api/v1/devices", Access.BEARER), Route("/devices", Access.SESSION)),
    metrics=("lifebot_transcription_queue",),
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
    routes=(
        Route("/omi", Access.PATH_TOKEN, max_body=8 * 1024 * 1024),
        # The conversation ("memory created") webhook: a transcript, not audio.
        Route("/omi/{token}/conversation", Access.PATH_TOKEN, max_body=5_000_000),
    ),
)
"""Omi's declaration (its device tokens are the pendant's)."""

WYOMING = Feature(
    name="wyoming",
    about="Home Assistant's voice pipelines over Wyoming: speech to text, text to speech, "
    "and lifebot as a conversation agent.",
)
"""Wyoming's declaration: it keeps nothing of its own (requests are messages)."""
