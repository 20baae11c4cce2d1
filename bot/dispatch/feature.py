"""The spine's declaration: people, their channels, conversations, tasks and questions back."""

from __future__ import annotations

from bot.feature import Feature, IntentWords, NotReference, Reference, Secret

FEATURE = Feature(
    name="conversations",
    about="Who people are on each channel, their conversations and messages, tasks, the "
    "questions lifebot asks back and the agent's language model.",
    tables=(
        "channelidentity",
        "conversation",
        "message",
        "delivery",
        "pairingrequest",
        "pendinganswer",
        "task",
    ),
    references=(
        Reference("message", "reply_to_id", target="message"),
        # An answer's sources: each citation names its kind and the row's id (as text).
        Reference(
            "message",
            "citations",
            path=("*", "source_id"),
            by="kind",
            targets=(
                ("message", "message"),
                ("transcript", "message"),
                ("image", "message"),
                ("episode", "episode"),
                ("fact", "fact"),
                ("journal", "journalentry"),
                ("document", "documentchunk"),
            ),
        ),
        Reference("conversation", "summary_through", target="message", mark=True),
        # A question back that got no answer is pushed once (bot/agent/ask.py).
        Reference("delivery", "key", template="ask_timeout:{user}:{message}"),
    ),
    not_references=(
        NotReference("message", "tool_calls", "the model's calls as it made them, replayed"),
        NotReference("message", "meta", "channel extras; photos and documents declare theirs"),
        NotReference("delivery", "payload", "the push's text; features declare their ids"),
    ),
    secrets=(
        Secret("language model API key", setting="openai_api_key"),
        Secret("database password", setting="database_url_setting"),
        # postgresql://user:password@host: the password part of any address with credentials.
        Secret(
            "password in an address",
            shape=r"(://[^/\s:@]+:)[^@\s/]+(?=@)",
            example="postgresql://lifebot:Tr0ub4dor-and-3@db.example.test:5432/lifebot",
        ),
    ),
    intents=(
        IntentWords("tasks", r"\b(tasks?|todos?|to-dos?|to do list|tick (it |that )?off)\b"),
        IntentWords("time", r"\b(time ?zone|what time|what's the time|what day is it)\b"),
    ),
    tools=(
        "current_time",
        "set_timezone",
        "create_task",
        "list_tasks",
        "complete_task",
        "ask_user",
    ),
    always_offered=("ask_user",),
    commands=(
        "start",
        "help",
        "link",
        "approve",
        "tasks",
        "task",
        "tz",
        "retry",
        "answer",
        "new",
        "threads",
        "settings",
        "dates",
        "voice",
        "channel",
        "quiet",
    ),
    jobs=("ask.timeouts", "outbox.reconcile"),
    metrics=(
        "lifebot_messages_total",
        "lifebot_turns_total",
        "lifebot_turn_seconds",
        "lifebot_turns_unanswered",
        "lifebot_llm_calls_total",
        "lifebot_llm_errors_total",
        # The outbox every feature that speaks first pushes through, and who runs the jobs.
        "lifebot_pushes_total",
        "lifebot_push_lateness_seconds",
        "lifebot_outbox_pushes",
        "lifebot_scheduler_leader",
    ),
)
