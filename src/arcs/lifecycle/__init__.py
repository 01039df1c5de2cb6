"""What happens to stored data after ingest: compaction, retention, delete, and their schedule."""
