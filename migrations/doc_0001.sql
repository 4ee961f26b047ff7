-- A document kind's room (src/host/doc.rs): the document as a snapshot in chunks and the
-- log of updates after it. Applied at every load (IF NOT EXISTS).

-- `generation`: the snapshot's generation that is current (0 or absent: none yet).
CREATE TABLE IF NOT EXISTS doc_meta (
  k TEXT PRIMARY KEY,
  v INTEGER NOT NULL
);

-- The whole document encoded once (a Yjs update, lib0 v1), in chunks of at most 1 MiB.
CREATE TABLE IF NOT EXISTS doc_snapshot (
  generation INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (generation, idx)
);

-- Named versions a backend saved (PROTOCOL-DOCUMENTS.md, "Versions"): the whole document
-- encoded once, in chunks of at most 1 MiB; at most 20 names.
CREATE TABLE IF NOT EXISTS doc_versions (
  name TEXT NOT NULL,
  idx INTEGER NOT NULL,
  created INTEGER NOT NULL,
  data BLOB NOT NULL,
  PRIMARY KEY (name, idx)
);

-- Every update stored since the snapshot, in order.
CREATE TABLE IF NOT EXISTS doc_log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  data BLOB NOT NULL
);
