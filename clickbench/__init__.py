"""ClickBench for Arc Serverless: generated hits-shaped data (``clickbench.generate``)."""
