"""Pure metric functions returning ``dict[str, float]``."""
