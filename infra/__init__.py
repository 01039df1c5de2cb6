"""The AWS CDK app of Arc Serverless: one stack, one construct per function (mirrors ``functions/``).

Run it as a module (``uv run python -m infra.app``, or ``cdk synth`` with the repo's ``cdk.json``).
Infra imports nothing of the core but ``arcs.envvars``, the names of the environment variables.
"""
