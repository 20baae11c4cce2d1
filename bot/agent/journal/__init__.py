"""The journal: entries people write or say, their mood scores, series, summaries and charts."""
