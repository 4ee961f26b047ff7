-- The room's relays (issue 19): the newest instance of each relay the home
-- listens to (an older one is refused), and the sessions the relays hold, so
-- that a home rebuilt after an eviction or a reset knows them again. Rows of
-- a link that closed are deleted with it, and when the room loads without it.
CREATE TABLE IF NOT EXISTS relays (
  name  TEXT PRIMARY KEY,
  epoch INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS relay_peers (
  conn TEXT PRIMARY KEY,
  link TEXT NOT NULL,
  peer TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS relay_peers_link ON relay_peers (link);
