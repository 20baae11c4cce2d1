"""Memory's declaration: facts, episodes, the search index and counts of what the user did."""

from __future__ import annotations

from bot.feature import Access, Feature, FileKind, IntentWords, NotReference, Reference, Route
from storage.repos.facts import settle_twins

FEATURE = Feature(
    name="memory",
    about="Facts, episodes and the search index over everything said; answers cite it.",
    tables=("fact", "episode", "memoryitem", "memorycursor"),
    # One live fact per wording (migration 0023): an older export's twin becomes replaced.
    import_fixes=(settle_twins,),
    references=(
        Reference("fact", "source_message_ids", target="message", path=("*",)),
        Reference("fact", "superseded_by", target="fact"),
        Reference("episode", "source_message_ids", target="message", path=("*",)),
        Reference("episode", "scope", template="conv:{conversation}"),
        Reference("memorycursor", "scope", template="conv:{conversation}"),
        Reference("memorycursor", "last_message_id", target="message", mark=True),
        Reference(
            "memoryitem",
            "source_id",
            by="kind",
            targets=(
                ("message", "message"),
                ("image", "message"),
                ("episode", "episode"),
                ("fact", "fact"),
                ("journal", "journalentry"),
                ("document", "documentchunk"),
            ),
        ),
        Reference("memoryitem", "conversation_id", target="conversation"),
        # What an item is known by (bot/agent/memory/index.py): ``episode:12`` and kin, and a
        # message without a channel id by its own id.
        Reference("memoryitem", "ref", template="episode:{episode}"),
        Reference("memoryitem", "ref", template="fact:{fact}"),
        Reference("memoryitem", "ref", template="journal:{journalentry}"),
        Reference("memoryitem", "ref", template="image:{message}"),
        Reference("memoryitem", "ref", same_as="source_id"),
        # Imported chat history is deduplicated per user (bot/app/importer.py): the same file
        # imported again after a move still adds nothing.
        Reference("message", "dedupe_key", template="import:{user}:"),
    ),
    not_references=(
        NotReference("episode", "people", "names"),
        NotReference("episode", "topics", "words"),
    ),
    files=(
        FileKind(
            "search-cache",
            "words of each user's searchable items, so a cold search need not re-read them",
            derived=True,
        ),
    ),
    intents=(
        IntentWords(
            "memory",
            r"\b(remember|forget|facts?|know about me|did i|have i|when did|what did|"
            r"who is|who's|notes?|said|told|tell me about|search|find|conversations?|talked|"
            r"mentioned|yesterday|last week|how many times|how often)\b",
        ),
        # Counts and comparisons are routed by the question's kind, not by words.
        IntentWords("count", ""),
    ),
    tools=(
        "search_memory",
        "get_conversations",
        "get_recent",
        "get_episode",
        "list_facts",
        "remember_fact",
        "forget_fact",
        "count_times",
    ),
    commands=("remember", "facts", "forget", "sources", "memoryfile"),
    jobs=("memory.extract",),
    routes=(
        Route("/api/v1/memory", Access.BEARER),
        Route("/api/v1/facts", Access.BEARER),
        Route("/memory", Access.SESSION),
        Route("/memory/file", Access.SESSION, max_body=1_000_000),
        Route("/facts", Access.SESSION),
    ),
)
