"""The console: `/` and its static assets under `/ui/`, plain HTML, CSS and ES modules (no build step).

The page holds no data: it calls the API like any client, with the caller's bearer token
(asked for once, kept in sessionStorage) or, in protected mode on loopback, none. So these
routes are public, like /openapi.json, while every API call keeps its own scope. Only the
files shipped in api/ui are served (read once, by exact name: no path from the request
reaches the file system). A strict Content-Security-Policy allows scripts, styles and
fetches from this origin only and no inline script; the scripts render data as text.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from api.routing import Route

UI_DIR = Path(__file__).parent / "ui"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _load(root: Path) -> dict[str, tuple[bytes, str]]:
    """Every shipped asset by its path under /ui/, with its media type."""
    return {
        path.relative_to(root).as_posix(): (path.read_bytes(), _TYPES[path.suffix])
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.suffix in _TYPES
    }


ASSETS = _load(UI_DIR)


def _asset(name: str) -> web.Response:
    found = ASSETS.get(name)
    if found is None:
        raise web.HTTPNotFound()
    body, media_type = found
    return web.Response(body=body, content_type=media_type, charset="utf-8", headers=HEADERS)


async def console(request: web.Request) -> web.Response:
    return _asset("index.html")


async def ui_asset(request: web.Request) -> web.Response:
    return _asset(request.match_info["name"])


ROUTES = (
    Route("GET", "/", console, "The web console (HTML; it calls this API with your token)", scope="public",
          content_type="text/html"),
    Route("GET", "/ui/{name:[A-Za-z0-9_./-]+}", ui_asset, "The console's scripts and styles", scope="public",
          content_type="text/javascript", errors=(web.HTTPNotFound,)),
)  # fmt: skip
