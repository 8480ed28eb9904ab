-- The leader moves every due job's cursor (last_scheduled_for) each time it writes its ticks:
-- with jobs firing every second that is thousands of row updates a second. Room left on each
-- page lets those be HOT updates (no new index entries, dead versions pruned within the page
-- without a vacuum) instead of growing the table and all three of its indexes.
ALTER TABLE jobs SET (fillfactor = 50);
