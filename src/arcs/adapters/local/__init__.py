"""The standalone server's adapters: a directory, the disk spool and one SQLite file, one module
per port (the same names as ``arcs.adapters.aws.wiring``), the claim on the data directory, and their
wiring (``wiring``)."""
