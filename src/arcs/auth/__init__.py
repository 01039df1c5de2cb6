"""API tokens, their scopes and permissions, and the throttle on failed authentications."""
