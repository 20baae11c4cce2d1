"""Memory: indexing, episodes, fact extraction and dedupe, and numbered sources.

The service (``MemoryService``) is what the rest of lifebot uses; retrieval lives in
``bot.agent.retrieval``.
"""
