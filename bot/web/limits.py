"""What the request layer enforces, as data the composition root hands down (issue 28).

Kept apart from ``bot.web.gate`` so building the app (every CLI command) does not load
FastAPI: the options are made at build time, the gate only when the page is served.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.feature import Registry, Route


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """The request layer's limits, resolved from Settings by the composition root."""

    registry: Registry
    """The registered features, whose ``routes`` say who may call what and how big a body is."""
    setting_limits: Mapping[str, int] = field(default_factory=dict)
    """Body limits the operator sets, in bytes, by the ``Settings`` field a route names
    (``image_max_bytes``)."""
    max_json_depth: int = 32
    """Nesting a JSON body may have (lifebot's own formats need 6)."""
    form_envelope: int = 64 * 1024
    """Bytes a multipart body may carry beyond a file limit set by the operator."""

    def file_limit(self, route: Route) -> int | None:
        """The operator's file size limit of an upload route, or None."""
        if route.max_body_setting is None:
            return None
        return self.setting_limits[route.max_body_setting]

    def max_body(self, route: Route) -> int:
        """The body cap of a declared route, in bytes."""
        if route.max_body_setting is not None:
            return self.setting_limits[route.max_body_setting] + self.form_envelope
        return route.max_body
