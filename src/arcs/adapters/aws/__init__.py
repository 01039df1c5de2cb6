"""The adapters of the Lambda functions: S3 (and S3 Express), SQS and DynamoDB, one module per
port, and their wiring (``wiring``: the clients, the resources, the runtime's parts)."""
