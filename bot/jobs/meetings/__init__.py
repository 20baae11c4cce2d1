"""Meeting transcripts posted to the API, turned into memory.

``wire`` reads the posted formats; ``ingest`` queues each post durably, debounces and
retries it, then hands the transcript to memory.
"""
