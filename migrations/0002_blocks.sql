-- Users the operator blocked from the room (POST /rooms/{room}/kick with
-- block_secs), until a time in ms. Ended blocks are deleted as new ones
-- are written and ignored when the room loads.
CREATE TABLE IF NOT EXISTS blocks (
  user  TEXT PRIMARY KEY,
  until INTEGER NOT NULL
);
