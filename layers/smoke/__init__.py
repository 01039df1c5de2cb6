"""The built layers, alone, run every function and every route: the smoke test's inside.

Run by :mod:`layers.check` in a clean interpreter (``python3.12 -I -S``: no site-packages, no
user site, no PYTHONPATH) whose ``sys.path`` is the standard library plus the layers' ``python/``
directories, like ``/opt/python`` in Lambda. Only the standard library and the layers may be
imported here. Against a moto server (``AWS_ENDPOINT_URL``) it runs each handler of
``functions/`` as Lambda would call it:

- bootstrap: a CloudFormation ``Create`` reads the token from Secrets Manager, creates the admin
  token and answers at the ``ResponseURL`` (a local HTTP server here);
- authorizer: that token becomes the caller's identity for every route below;
- edge: each write route queues its body to SQS; ingest turns the queued writes into Parquet;
  a line-protocol file posted to the import route (a multipart form, as Arc's clients send it)
  is checked whole and its chunks queued as writes, which ingest stores;
- query: every other route of the HTTP API (:data:`ROUTES` lists them all, and a unit test checks
  the list against the routers), DuckDB's httpfs coming from the duckdb layer (autoinstall off,
  an empty home: nothing can be downloaded). The compaction trigger's asynchronous ``Invoke`` of
  the tasks function (``ARCS_TASKS_FUNCTION``) goes to the server's Lambda API, which takes
  it without running code; the server's recorder keeps the request;
- tasks: each task of the schedules (compaction, continuous queries, retention), and the
  payload of that recorded ``Invoke`` as its event;
- an upload: the query function signs a ``PUT`` of a file to the bucket (the server's S3 API
  takes it); completing it invokes the tasks function as the trigger does, and the recorded
  event, run by the tasks handler (task ``import``), stores the file; the import's status and
  a query show its rows;
- the query function as the stack runs it, streaming: the core layer's wrapper
  (``AWS_LAMBDA_EXEC_WRAPPER``) started as Lambda starts it, with the interpreter, on a Runtime
  API over HTTP (``arcs.emulation.runtime_api``); its answers to queries (JSON, Arrow), to
  another route and to a failing query must come back in Lambda's streaming mode, in chunks, in
  API Gateway's streamed format.

Usage: ``python -I -S -B layers/smoke FUNCTIONS_DIR LAYER_PYTHON_DIR...`` (``__main__.py``); prints
``smoke ok: ...`` and exits 0. Its parts: ``routes`` (what it must call), ``calls`` (invoking the
handlers as Lambda does, and what the moto server recorded), ``steps`` (writing, querying,
importing, the tasks) and ``run`` (the streaming runtime, and the order of it all).
"""
