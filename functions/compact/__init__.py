"""The compact function: EventBridge -> merge small files (retention and continuous queries come later)."""
