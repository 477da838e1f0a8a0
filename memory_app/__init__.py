"""Long-term memory: records with provenance, embeddings, recall and context injection (issue 4)."""
