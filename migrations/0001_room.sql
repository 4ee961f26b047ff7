-- The room's identity: `room` (its name) and `epoch` (names this log; a new
-- epoch means clients must resync).
CREATE TABLE IF NOT EXISTS meta (
  k TEXT PRIMARY KEY,
  v TEXT NOT NULL
);

-- The retained log: the newest `log_retain` (default 1000) sequenced
-- messages. The newest row is never trimmed, so MAX(seq) is the room's seq.
CREATE TABLE IF NOT EXISTS log (
  seq INTEGER PRIMARY KEY,
  session TEXT NOT NULL,
  id TEXT NOT NULL,
  user TEXT NOT NULL,
  region TEXT NOT NULL,
  topic TEXT NOT NULL,
  data TEXT NOT NULL,
  ts INTEGER NOT NULL
);

-- Room state: each key's JSON value and the seq of the `set` that wrote it.
CREATE TABLE IF NOT EXISTS state (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  version INTEGER NOT NULL
);
