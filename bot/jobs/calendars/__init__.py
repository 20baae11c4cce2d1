"""Calendars: lifebot's own events, the user's calendars read in, and events proposed.

``events`` words lifebot's events and exports them as ICS; ``ics`` reads other people's
calendars, ``caldav`` talks to a CalDAV server, ``own`` keeps the user's imported files,
feeds and CalDAV links; ``proposals`` are events spotted in chats and stays, for the user
to accept or decline.
"""
