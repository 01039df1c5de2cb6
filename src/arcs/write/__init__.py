"""Writes: the edge that accepts them, the queued envelope, schemas, ingest into Parquet, the
wire decoders and bulk import."""
