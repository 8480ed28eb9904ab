"""Typed keys of what the application holds."""

from __future__ import annotations

from aiohttp import web

from api.backends import Backends

BACKENDS = web.AppKey("backends", Backends)
