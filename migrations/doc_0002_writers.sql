
-- Which user each Yjs client id that has written to the document writes for: the first whose
-- update brought blocks of it the document took (src/doc/writers.rs). No other user may write
-- for it. One row per Yjs client of the document, each of which counts as a block: at most
-- MAX_BLOCKS (200,000) rows. Also a client a token user's awareness showed before it wrote
-- (session 34): at most 16 a user that have not written, 200,000 in all.
CREATE TABLE IF NOT EXISTS doc_writers (
  client INTEGER PRIMARY KEY,
  user TEXT NOT NULL
);
