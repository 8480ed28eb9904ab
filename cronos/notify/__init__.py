"""Notifications (issue 24): which channel hears of which job event (rules), and what it says
(message). Pure; the leader's notifier (dispatcher/notifier.py) reads the facts, applies the
decisions with the store (cronos.store.notify) and sends (cronos.notify.send)."""
