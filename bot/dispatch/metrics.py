"""What the dispatcher counts: messages in and out, turns by outcome, how long answers take."""

from __future__ import annotations

from bot.metrics import Counter, Histogram

MESSAGES = Counter(
    "lifebot_messages_total",
    "Messages people sent that this process handled (in) and the replies it sent (out), "
    "by channel.",
    ("channel", "direction"),
)
TURNS = Counter(
    "lifebot_turns_total",
    "Messages handled, by channel and outcome: answered, command, llm_down, pairing, "
    "linking, location, duplicate, ignored, failed.",
    ("channel", "outcome"),
)
TURN_SECONDS = Histogram(
    "lifebot_turn_seconds",
    "Seconds from a message reaching lifebot to its answer sent, for messages the agent "
    "answered (or told the model was down).",
)


def observe_turn(channel: str, outcome: str, replied: bool, seconds: float) -> None:
    """Count one handled message (a redelivered duplicate is not a message in)."""
    TURNS.inc(channel, outcome)
    if outcome != "duplicate":
        MESSAGES.inc(channel, "in")
    if replied:
        MESSAGES.inc(channel, "out")
    if outcome in ("answered", "llm_down"):
        TURN_SECONDS.observe(seconds)
