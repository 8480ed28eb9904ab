"""Typed keys of what the application holds."""

from __future__ import annotations

from aiohttp import web

from api.backends import Backends
from cronos.settings import Settings

BACKENDS = web.AppKey("backends", Backends)
SETTINGS = web.AppKey("settings", Settings)
