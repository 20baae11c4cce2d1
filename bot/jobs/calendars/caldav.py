"""Two-way CalDAV: read the user's real calendar, write accepted events into it.

The ``caldav`` client (3.x) is used through its synchronous API (over niquests), so every
call runs in a worker thread. The password is stored Fernet-encrypted with
``LIFEBOT_CALENDAR_KEY``; it is decrypted only for the moment of a call. Events lifebot wrote
carry lifebot's own event uid as their ICS UID, so reading the calendar back never doubles
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from bot.errors import CalendarError, ConfigError
from bot.jobs.calendars.events import to_ics
from storage.models import CalendarEvent

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

# caldav (with niquests and lxml) and cryptography load on first use: most processes never
# touch CalDAV, and start-up time is watched.


class SecretBox:
    """Encrypts and decrypts stored calendar passwords with the key from settings."""

    def __init__(self, key: str | None) -> None:
        self._fernet: Fernet | None = None
        if key:
            from cryptography.fernet import Fernet  # noqa: PLC0415  (first use only)

            try:
                self._fernet = Fernet(key.encode())
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    [
                        "LIFEBOT_CALENDAR_KEY is not a Fernet key (32 url-safe base64 bytes); "
                        "make one with `lifebot calendar key`"
                    ]
                ) from exc

    @property
    def ready(self) -> bool:
        """True when a key is configured."""
        return self._fernet is not None

    def seal(self, secret: str) -> str:
        """The secret encrypted (CalendarError when no key is configured)."""
        if self._fernet is None:
            raise CalendarError(
                "CalDAV needs LIFEBOT_CALENDAR_KEY set (make one with `lifebot calendar key`) "
                "so your password is stored encrypted"
            )
        return self._fernet.encrypt(secret.encode()).decode()

    def open(self, sealed: str) -> str:
        """The secret back (CalendarError when the key is missing or changed)."""
        if self._fernet is None:
            raise CalendarError("LIFEBOT_CALENDAR_KEY is not set, so the password cannot be read")
        from cryptography.fernet import InvalidToken  # noqa: PLC0415  (first use only)

        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise CalendarError(
                "the stored password cannot be decrypted: LIFEBOT_CALENDAR_KEY changed; "
                "add the CalDAV calendar again"
            ) from exc


def new_key() -> str:
    """A fresh key for LIFEBOT_CALENDAR_KEY."""
    from cryptography.fernet import Fernet  # noqa: PLC0415  (first use only)

    return Fernet.generate_key().decode()


@dataclass(frozen=True, slots=True)
class Login:
    """Where and as whom to reach one CalDAV calendar."""

    url: str
    """The calendar collection's URL (or the server's, to find the first calendar)."""
    username: str
    """User name."""
    password: str
    """Password (plain, in memory only for the call)."""


def event_ics(event: CalendarEvent, now: datetime, tz: ZoneInfo) -> str:
    """One lifebot event as a VCALENDAR for a CalDAV PUT (lifebot's uid)."""
    return to_ics([event], now=now, tz=tz)


def _client(login: Login) -> Any:
    """The client, as Any: caldav 3 types its shared sync/async methods as ``X | Coroutine``."""
    from caldav.davclient import DAVClient  # noqa: PLC0415  (first use only)

    # No RFC 6764 discovery: the client talks to the URL it was given, never to a host that
    # DNS SRV records name instead (caldav 1.x did not discover either).
    return DAVClient(
        login.url, username=login.username, password=login.password, enable_rfc6764=False
    )


def _calendar(client: Any, login: Login) -> Any:
    """The calendar at the URL, or the account's first calendar when the URL is the server."""
    from caldav.lib import error as caldav_errors  # noqa: PLC0415  (first use only)

    target = client.calendar(url=login.url)
    try:
        target.get_events()
    except caldav_errors.AuthorizationError:
        raise
    except caldav_errors.DAVError:
        calendars = client.get_principal().get_calendars()
        if not calendars:
            raise CalendarError("that CalDAV account has no calendar") from None
        return calendars[0]
    return target


def _translate(exc: Exception) -> CalendarError:
    """The server's failure in plain words; anything else is re-raised as it is."""
    from caldav.lib import error as caldav_errors  # noqa: PLC0415  (first use only)
    from niquests import RequestException  # noqa: PLC0415  (first use only)

    if not isinstance(exc, caldav_errors.DAVError | RequestException):
        raise exc
    if isinstance(exc, caldav_errors.AuthorizationError):
        return CalendarError("the CalDAV server refused the user name or password")
    if isinstance(exc, RequestException):
        return CalendarError(f"the CalDAV server could not be reached ({type(exc).__name__})")
    return CalendarError(f"the CalDAV server failed ({type(exc).__name__})")


def check(login: Login) -> str:
    """Log in and find the calendar (blocking); its collection URL. CalendarError otherwise."""
    try:
        with _client(login) as client:  # its connections close, whatever happens
            return str(_calendar(client, login).url)
    except (CalendarError, ValueError, TypeError, AttributeError):
        raise  # our own words, or a programming error: not the server's doing
    except Exception as exc:  # caldav raises DAVError, niquests its own: translated
        raise _translate(exc) from exc


def read_all(login: Login) -> list[str]:
    """Every event object's iCalendar text in the calendar (blocking)."""
    try:
        with _client(login) as client:
            return [str(obj.data) for obj in client.calendar(url=login.url).get_events()]
    except (CalendarError, ValueError, TypeError, AttributeError):
        raise  # our own words, or a programming error: not the server's doing
    except Exception as exc:  # caldav raises DAVError, niquests its own: translated
        raise _translate(exc) from exc


def write(login: Login, ics: str) -> None:
    """Create or replace one event (blocking)."""
    try:
        with _client(login) as client:
            client.calendar(url=login.url).add_event(ics)
    except (CalendarError, ValueError, TypeError, AttributeError):
        raise  # our own words, or a programming error: not the server's doing
    except Exception as exc:  # caldav raises DAVError, niquests its own: translated
        raise _translate(exc) from exc
