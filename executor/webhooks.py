"""Moved to cronos.webhooks (the leader's notifier signs its webhooks with it too); kept as a name."""

from cronos.webhooks import SECRET_PREFIX, message_id, sign, signature_headers

__all__ = ["SECRET_PREFIX", "message_id", "sign", "signature_headers"]
