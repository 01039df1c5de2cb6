"""The compact function (EventBridge -> merge small files, retention, continuous queries).

Not built yet: it lands with the storage-lifecycle issue. Nothing deploys it until then.
"""
