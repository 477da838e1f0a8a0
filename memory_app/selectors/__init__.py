"""Reads of memory: `recall` (hybrid search), `context` (the block injected into a session) and `records`
(nearest records, what waits for a vector, the records an extractor sees). Writes are in `services` (records)
and `embeddings` (vectors)."""
