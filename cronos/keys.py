"""Every Redis key name, as a function of the configured prefix.

The stream key carries a hash tag so a Redis Cluster keeps the stream, its group and
the scripts that touch them on one slot. Per-tick lock keys are independent of each
other and spread over the cluster on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str

    @property
    def leader(self) -> str:
        return f"{self.prefix}{{leader}}"

    @property
    def stream(self) -> str:
        return f"{self.prefix}{{runs}}:stream"

    @property
    def group(self) -> str:
        return "executors"

    @property
    def redis_marker(self) -> str:
        """Set by the leader; its absence tells the leader Redis lost its data."""
        return f"{self.prefix}{{runs}}:marker"

    def tick_lock(self, job_id: int, scheduled_for_ms: int, attempt: int) -> str:
        return f"{self.prefix}lock:{job_id}:{scheduled_for_ms}:{attempt}"

    def job_lock(self, job_id: int) -> str:
        return f"{self.prefix}joblock:{job_id}"

    def node_heartbeat(self, role: str, node_id: str) -> str:
        return f"{self.prefix}node:{role}:{node_id}"

    @property
    def node_pattern(self) -> str:
        return f"{self.prefix}node:*"
