"""Namespace statements (cronos.store.namespaces)."""

from __future__ import annotations

NAMESPACES_ALL = "SELECT name, created_at FROM namespaces ORDER BY name"
# Create when missing: no row when it exists.
NAMESPACE_INSERT = """
INSERT INTO namespaces (name) VALUES ($1)
ON CONFLICT (name) DO NOTHING
RETURNING name, created_at
"""
NAMESPACE_GET = "SELECT name, created_at FROM namespaces WHERE name = $1"
# Deleted only while no job is in it (jobs_namespace_fkey refuses otherwise).
NAMESPACE_DELETE = "DELETE FROM namespaces WHERE name = $1 RETURNING name"
