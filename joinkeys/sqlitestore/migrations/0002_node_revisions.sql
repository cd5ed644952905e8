-- Every write of a node gives it a new revision from one store-wide
-- counter, so a write conditioned on a revision never lands on a record
-- written since, nor on a new node under a released hostname.
CREATE TABLE node_revision (
	id    INTEGER PRIMARY KEY CHECK (id = 1),
	value INTEGER NOT NULL
);
ALTER TABLE nodes ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
UPDATE nodes SET revision = rowid;
INSERT INTO node_revision (id, value) VALUES (1, (SELECT COALESCE(MAX(rowid), 0) FROM nodes));
