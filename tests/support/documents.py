"""Real PDFs written byte by byte for the document tests: a small one (one Helvetica text line
per page) and hostile ones built at run time (one that unpacks to a gigabyte, one with tens of
thousands of pages), so no big file is ever committed."""

from __future__ import annotations

import zlib


def pdf(*pages: str) -> bytes:
    """A valid PDF whose page N shows ``pages[N-1]`` (ASCII, no parentheses or backslashes)."""
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the page object numbers are known
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for text in pages:
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("ascii")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content
        )
        kids.append(len(objects))
    refs = b" ".join(b"%d 0 R" % k for k in kids)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (refs, len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _zlib_of_spaces(prefix: bytes, chunks: int, chunk: int = 16 << 20) -> bytes:
    """A zlib stream of ``prefix`` and ``chunks * chunk`` spaces, built in about a second.

    After a full flush the compressor starts afresh, so every chunk compresses to the same
    bytes: compress one, repeat it, and add the checksum of the whole.
    """
    spaces = b" " * chunk
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    body = deflate.compress(spaces) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert body == deflate.compress(spaces) + deflate.flush(zlib.Z_FULL_FLUSH)
    checksum = zlib.adler32(prefix)
    for _ in range(chunks):
        checksum = zlib.adler32(spaces, checksum)
    return b"\x78\xda" + head + body * chunks + deflate.flush() + checksum.to_bytes(4, "big")


def unpacking_pdf(chunks: int = 64) -> bytes:
    """About 1 MB that unpacks to ``chunks`` x 16 MiB (64: 1 GiB): its one page lives in an
    object stream padded with spaces, so opening the page means inflating all of it."""
    header = b"3 0 "
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"
    packed = _zlib_of_spaces(header + page, chunks)
    body = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        4: b"<< /Type /ObjStm /N 1 /First %d /Length %d /Filter /FlateDecode >>\nstream\n%s\n"
        b"endstream" % (len(header), len(packed), packed),
    }
    out = bytearray(b"%PDF-1.5\n")
    offsets: dict[int, int] = {}
    for n, text in body.items():
        offsets[n] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (n, text)
    xref = len(out)
    # Cross-reference stream rows: type, offset (or object stream), generation (or index).
    rows = [b"\x00\x00\x00\x00\x00\xff\xff"]
    rows += [b"\x01" + offsets[n].to_bytes(4, "big") + b"\x00\x00" for n in (1, 2)]
    rows += [b"\x02" + (4).to_bytes(4, "big") + b"\x00\x00"]  # object 3: in stream 4
    rows += [b"\x01" + offsets[4].to_bytes(4, "big") + b"\x00\x00"]
    rows += [b"\x01" + xref.to_bytes(4, "big") + b"\x00\x00"]  # object 5: this table
    table = b"".join(rows)
    out += b"5 0 obj\n<< /Type /XRef /Size 6 /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n" % (
        len(table)
    )
    out += table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def many_pages_pdf(count: int, declared: int | None = None) -> bytes:
    """``count`` pages sharing one drawing; the page tree says ``declared`` (default: count)."""
    drawing = b"BT /F1 12 Tf 72 720 Td (page) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, below
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(drawing), drawing),
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    )
    objects += [page] * count
    kids = b" ".join(b"%d 0 R" % n for n in range(5, 5 + count))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        kids,
        count if declared is None else declared,
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
