"""Infra tests run the CDK through jsii, which starts one node process for the whole session.

Node 20 prints an end-of-life banner on every start unless told not to; the variable must be in
the environment before ``aws_cdk`` is first imported (that import starts node), so it is set
here, at collection, rather than in a fixture. It changes nothing but that banner.
"""

from __future__ import annotations

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
