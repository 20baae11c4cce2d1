"""The web room: server-rendered pages, the REST API under /api/v1, health and metrics.

It calls the same services the chat commands use (memory, jobs, identity) and reaches storage
only through repositories.
"""
