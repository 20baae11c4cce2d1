"""The text of a PDF, page by page, read inside a bounded child process (``bot.isolated``).

``python -m bot.isolated ... bot.agent.pdf_text`` reads the PDF on stdin and writes one JSON
object on stdout: ``{"pages": [...]}``, ``{"refused": why}`` (over a limit: the caller keeps
nothing) or ``{"unreadable": why}`` (damaged or encrypted: kept, not searchable). The limits
are checked before the work they guard: the declared page count before the page tree is
walked, pypdf's own limits (``apply_configuration``) on every stream it inflates and on the
page tree it walks, and the text gathered so far before the next page. The wall-clock and
memory bounds are the parent's (``Documents``). Only the standard library and pypdf are
imported here: the child starts in a fraction of a second.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

MAX_PAGES = 500
"""More pages than this and the document is refused (a book of about 150,000 words fits)."""
MAX_STREAM_BYTES = 32_000_000
"""The most any one part of the file (a page's drawing, a font, an object stream) may unpack to."""
MAX_TEXT_CHARS = 10_000_000
"""The most text kept from one document (about 20 times a 500-page book's)."""

STREAM_LIMITS = (
    "maximum_declared_stream_length",
    "array_based_stream_maximum_output_length",
    "jbig2_maximum_output_length",
    "lzw_maximum_output_length",
    "run_length_maximum_output_length",
    "zlib_maximum_output_length",
    "brotli_maximum_output_length",
    "image_maximum_buffer_size",
)
"""pypdf's per-stream output limits (``pypdf.Configuration``, 7.x), all set to ours."""


class Refused(Exception):
    """Over a limit: nothing of the document is kept. The message finishes a sentence."""


class Unreadable(Exception):
    """Damaged or encrypted: kept, not searchable. The message finishes a sentence."""


def read_pages(data: bytes) -> dict[str, Any]:
    """The answer for ``data`` (see the module docstring)."""
    from pypdf.errors import LimitReachedError, PyPdfError  # noqa: PLC0415

    try:
        return {"pages": _pages(data)}
    except Refused as exc:
        return {"refused": str(exc)}
    except Unreadable as exc:
        return {"unreadable": str(exc)}
    except LimitReachedError as exc:
        if "page tree" in str(exc):
            return {"refused": f"it has more than {MAX_PAGES} pages, my limit"}
        mb = MAX_STREAM_BYTES // 1_000_000
        return {"refused": f"a part of it unpacks to more than {mb} MB, my limit"}
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        # pypdf raises its own errors and, on damaged files, plain Python ones.
        why = str(exc)[:120] or type(exc).__name__
        return {"unreadable": f"it is not a PDF I can open ({why})"}


def _pages(data: bytes) -> list[str]:
    """Each page's text; Refused or Unreadable (pypdf's own errors pass through)."""
    from pypdf import PdfReader, apply_configuration  # noqa: PLC0415

    limits: dict[str, Any] = dict.fromkeys(STREAM_LIMITS, MAX_STREAM_BYTES)
    # Entries walked in the page tree: a lying /Count cannot make it walk 85,000 pages.
    limits.update(
        page_tree_maximum_entries=MAX_PAGES * 2, page_tree_maximum_page_entries=MAX_PAGES * 64
    )
    with apply_configuration(**limits):
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise Unreadable("it is password-protected")
        count = max(_declared_pages(reader), 0)
        if count <= MAX_PAGES:
            count = len(reader.pages)  # walks the page tree (bounded above)
        if count > MAX_PAGES:
            raise Refused(f"it has {count} pages and I read at most {MAX_PAGES}")
        pages: list[str] = []
        kept = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            kept += len(text)
            if kept > MAX_TEXT_CHARS:
                raise Refused(f"it holds more than {MAX_TEXT_CHARS:,} characters of text")
            pages.append(text)
        return pages


def _declared_pages(reader: Any) -> int:
    """The page count the file declares (``/Root /Pages /Count``); 0 when missing or odd."""
    try:
        count = reader.trailer["/Root"]["/Pages"].get("/Count", 0)
        return int(count)
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0


def main() -> None:
    """Read the PDF on stdin, write the answer on stdout."""
    answer = read_pages(sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(answer, ensure_ascii=False))


if __name__ == "__main__":
    main()
