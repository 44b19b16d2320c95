-- Issue 7: every change of a shard's owner raises its epoch (shard_epochs) and is
-- appended here, so an auditor can check that each (shard, epoch) had one owner and
-- that every accepted dispatch came from the owner of the epoch in force.

CREATE TABLE shard_claims (
    shard_id INTEGER NOT NULL,
    epoch BIGINT NOT NULL,
    owner VARCHAR(256) NOT NULL,
    claimed_at TIMESTAMP WITH TIME ZONE NOT NULL,
    PRIMARY KEY (shard_id, epoch)
);

-- The epoch under which a dispatch was accepted (NULL for other transitions and for
-- single-node dispatches): lets an audit check one owner per shard per epoch.
ALTER TABLE task_transitions ADD COLUMN epoch BIGINT;
