"""Reminders: words in, a confirmed reminder out, fired through the outbox.

``phrases`` is the deterministic parser (``patterns`` holds the words it knows);
``service`` sets, confirms, lists, cancels and fires reminders.
"""
