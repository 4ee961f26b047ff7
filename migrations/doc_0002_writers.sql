
-- Which user each Yjs client id that has written to the document writes for: the first whose
-- update brought its blocks (src/doc/writers.rs). No other user may write for it. At most one
-- row per Yjs client of the document, so at most MAX_BLOCKS (200,000) rows.
CREATE TABLE IF NOT EXISTS doc_writers (
  client INTEGER PRIMARY KEY,
  user TEXT NOT NULL
);
