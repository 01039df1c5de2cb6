"""cdk-nag (v3) helpers: findings are acknowledged on the construct they concern, always with a reason.

cdk-nag 3 is a CDK policy-validation plugin (``Validations.of(app).add_plugins``), no longer an
aspect, and its suppressions are CDK acknowledgments. A finding of a rule that reports several
(IAM5) is acknowledged one by one, as ``RuleId[Finding]``.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, CfnElement, Stack, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Accept one cdk-nag finding on ``scope`` and everything under it; ``reason`` says why."""
    if len(reason.strip()) < 20:
        raise ValueError(f"{rule_id}: give a real reason, not {reason!r}")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def logical_ref(construct: IConstruct) -> str:
    """The logical id cdk-nag prints for a reference to ``construct``'s CloudFormation resource.

    IAM5 names the resources of a finding as ``Resource::<LogicalId.Arn>/...``.
    """
    child = construct.node.default_child
    if not isinstance(child, CfnElement):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource")
    return Stack.of(construct).get_logical_id(child)
