-- The kind of GPU machine a registered node is (its first GPU's vendor,
-- an empty one being NVIDIA's, its model, and how many GPUs it has, joined
-- by the unit separator), computed from the row and indexed, so the
-- registered nodes of each kind are counted from the index alone.
ALTER TABLE nodes ADD COLUMN gpu_kind TEXT GENERATED ALWAYS AS (
	CASE WHEN status = 'registered' AND json_array_length(gpus) > 0 THEN
		coalesce(nullif(json_extract(gpus, '$[0].vendor'), ''), 'nvidia') || char(31) ||
		coalesce(json_extract(gpus, '$[0].name'), '') || char(31) ||
		json_array_length(gpus)
	END
) VIRTUAL;
CREATE INDEX nodes_gpu_kind ON nodes (gpu_kind) WHERE gpu_kind IS NOT NULL;
