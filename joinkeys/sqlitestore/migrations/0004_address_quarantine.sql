-- When each address was released: a reservation hands it out again only
-- once its quarantine is over (joinkeys.Reservation.ReleasedBefore).
-- Addresses released before this column existed have rested long enough.
ALTER TABLE ip_free ADD COLUMN released_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX ip_free_released ON ip_free (pool, released_at, ip);
