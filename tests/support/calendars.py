"""Helpers for the calendar tests: ICS bodies for the fake feed."""

from __future__ import annotations


def ics_body(*events: tuple[str, str, str]) -> bytes:
    """An ICS feed of (uid, start as UTC basic format, title), one hour each."""
    body = "".join(
        f"BEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20250101T000000Z\r\nDTSTART:{start}Z\r\n"
        f"DURATION:PT1H\r\nSUMMARY:{title}\r\nEND:VEVENT\r\n"
        for uid, start, title in events
    )
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n{body}END:VCALENDAR\r\n".encode()
