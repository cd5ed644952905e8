-- The registered nodes of each kind, kept by triggers in the transaction
-- that changes a node, so a count of the fleet by kind reads a row per
-- kind rather than an index entry per node.
CREATE TABLE gpu_kind_counts (
	gpu_kind TEXT PRIMARY KEY,
	nodes INTEGER NOT NULL CHECK (nodes > 0)
) WITHOUT ROWID;
INSERT INTO gpu_kind_counts (gpu_kind, nodes)
	SELECT gpu_kind, count(*) FROM nodes WHERE gpu_kind IS NOT NULL GROUP BY gpu_kind;
CREATE TRIGGER nodes_gpu_kind_counted AFTER INSERT ON nodes WHEN NEW.gpu_kind IS NOT NULL BEGIN
	INSERT INTO gpu_kind_counts (gpu_kind, nodes) VALUES (NEW.gpu_kind, 1)
		ON CONFLICT (gpu_kind) DO UPDATE SET nodes = nodes + 1;
END;
CREATE TRIGGER nodes_gpu_kind_uncounted AFTER DELETE ON nodes WHEN OLD.gpu_kind IS NOT NULL BEGIN
	DELETE FROM gpu_kind_counts WHERE gpu_kind = OLD.gpu_kind AND nodes = 1;
	UPDATE gpu_kind_counts SET nodes = nodes - 1 WHERE gpu_kind = OLD.gpu_kind;
END;
CREATE TRIGGER nodes_gpu_kind_recounted AFTER UPDATE ON nodes WHEN OLD.gpu_kind IS NOT NEW.gpu_kind BEGIN
	DELETE FROM gpu_kind_counts WHERE gpu_kind = OLD.gpu_kind AND nodes = 1;
	UPDATE gpu_kind_counts SET nodes = nodes - 1 WHERE gpu_kind = OLD.gpu_kind;
	INSERT INTO gpu_kind_counts (gpu_kind, nodes) SELECT NEW.gpu_kind, 1 WHERE NEW.gpu_kind IS NOT NULL
		ON CONFLICT (gpu_kind) DO UPDATE SET nodes = nodes + 1;
END;
-- Nothing reads the index of 0003 any more.
DROP INDEX nodes_gpu_kind;
