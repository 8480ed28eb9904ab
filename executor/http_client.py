"""Moved to cronos.http_guard (the leader's notifier sends through it too); kept as a name."""

from cronos.http_guard import (
    PREFIX,
    GuardedResolver,
    GuardRefused,
    guard_refusal,
    guarded_session,
    guarded_socket_factory,
    refusal,
)

__all__ = [
    "PREFIX",
    "GuardRefused",
    "GuardedResolver",
    "guard_refusal",
    "guarded_session",
    "guarded_socket_factory",
    "refusal",
]
