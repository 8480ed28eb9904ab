"""Every Redis key name, as a function of the configured prefix.

Hash tags keep together what one command or script touches, so a Redis Cluster works:
the stream of every queue, the set of queue names and the marker share `{runs}` (an executor
serving several queues reads their streams in one XREADGROUP); every tick lock shares `{ticks}`, because an
executor takes, renews and releases a batch of them in one script call.
"""

from __future__ import annotations

from dataclasses import dataclass

from cronos.models import DEFAULT_QUEUE


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str

    @property
    def leader(self) -> str:
        return f"{self.prefix}{{leader}}"

    @property
    def leader_released(self) -> str:
        """A list a leader pushes to as it gives up its lock: a standby blocked on it takes over at once."""
        return f"{self.prefix}{{leader}}:released"

    @property
    def stream(self) -> str:
        """The default queue's run stream: the one stream of old releases, so executors one
        release behind go on serving it in a rolling deploy."""
        return self.queue_stream(DEFAULT_QUEUE)

    def queue_stream(self, queue: str) -> str:
        """The run stream of `queue`."""
        base = f"{self.prefix}{{runs}}:stream"
        return base if queue == DEFAULT_QUEUE else f"{base}:{queue}"

    @property
    def queues(self) -> str:
        """The set of queue names the leader pushed to (housekeeping, metrics, /api/cluster)."""
        return f"{self.prefix}{{runs}}:queues"

    @property
    def group(self) -> str:
        return "executors"

    @property
    def redis_marker(self) -> str:
        """Set by the leader; its absence tells the leader Redis lost its data."""
        return f"{self.prefix}{{runs}}:marker"

    @property
    def cluster(self) -> str:
        """The cluster identity these keys belong to (cronos.identity). In `{runs}` with the
        marker: on a Redis Cluster both live on one shard, so a shard that loses its data loses
        both, and the leader that notices the marker gone writes the identity again."""
        return f"{self.prefix}{{runs}}:cluster"

    def tick_lock(self, job_id: int, scheduled_for_ms: int, attempt: int, host: str | None = None) -> str:
        """The lock of one tick's identity, (job, scheduled_for, attempt), and a per-host run's host
        (cronos.every_host: each host's run of the tick is its own)."""
        base = f"{self.prefix}lock:{{ticks}}:{job_id}:{scheduled_for_ms}:{attempt}"
        return base if host is None else f"{base}:{host}"

    def node_heartbeat(self, role: str, node_id: str) -> str:
        return f"{self.prefix}node:{role}:{node_id}"

    @property
    def node_pattern(self) -> str:
        return f"{self.prefix}node:*"

    def trigger_rate(self, trigger_id: int, window: int) -> str:
        """A trigger URL's call count in one rate window (cronos.trigger_hooks.window)."""
        return f"{self.prefix}trigger:{trigger_id}:rate:{window}"

    def trigger_seen(self, trigger_id: int, msg_id: str) -> str:
        """A signed trigger call's webhook-id, kept past the timestamp tolerance: a replay is refused."""
        return f"{self.prefix}trigger:{trigger_id}:seen:{msg_id}"
