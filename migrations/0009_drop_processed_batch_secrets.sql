-- Enqueued batches used to keep their keys' hashes and ciphertexts after the import. Drop them from every batch
-- that is done, or failed in a way a retry cannot fix (anything but a whole batch given up on an unexpected error,
-- which the operator may still retry: none of its keys was imported).
UPDATE migration_batches SET keys = NULL
WHERE keys IS NOT NULL AND (status = 'done' OR (status = 'failed' AND NOT EXISTS (
  SELECT 1 FROM migration_errors e
  WHERE e.batch_id = migration_batches.id AND e.key_index IS NULL AND e.code = 'INTERNAL_SERVER_ERROR'
)));
