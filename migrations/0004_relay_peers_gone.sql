-- A relay holds its sessions' records and gives them back to a home rebuilt
-- without them (issue 19): the home stores none, so a relayed join writes no
-- row. The table of the earlier schema goes.
DROP INDEX IF EXISTS relay_peers_link;
DROP TABLE IF EXISTS relay_peers;
