"""The HTTP API: the app and its routes, the standalone server, the event <-> request bridge, the
OpenAPI document and the Lambda runtime that streams responses."""
