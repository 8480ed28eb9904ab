-- Calendars, concurrency groups and notification channels belong to a namespace (issue 41, item 2):
-- listed and created per namespace, and a job may name only those of its own. Their names stay
-- unique across the cluster for now: the leader's rule book and the claim's slots know them by name.
-- Constant defaults (no rewrite); each foreign key added NOT VALID, then validated (one read).
ALTER TABLE concurrency_groups ADD COLUMN IF NOT EXISTS namespace text NOT NULL DEFAULT 'default';
ALTER TABLE concurrency_groups ADD CONSTRAINT concurrency_groups_namespace_fkey
    FOREIGN KEY (namespace) REFERENCES namespaces (name) NOT VALID;
ALTER TABLE concurrency_groups VALIDATE CONSTRAINT concurrency_groups_namespace_fkey;

ALTER TABLE calendars ADD COLUMN IF NOT EXISTS namespace text NOT NULL DEFAULT 'default';
ALTER TABLE calendars ADD CONSTRAINT calendars_namespace_fkey
    FOREIGN KEY (namespace) REFERENCES namespaces (name) NOT VALID;
ALTER TABLE calendars VALIDATE CONSTRAINT calendars_namespace_fkey;

ALTER TABLE notification_channels ADD COLUMN IF NOT EXISTS namespace text NOT NULL DEFAULT 'default';
ALTER TABLE notification_channels ADD CONSTRAINT notification_channels_namespace_fkey
    FOREIGN KEY (namespace) REFERENCES namespaces (name) NOT VALID;
ALTER TABLE notification_channels VALIDATE CONSTRAINT notification_channels_namespace_fkey;
