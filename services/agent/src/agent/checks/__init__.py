"""Answer checks: does a finished answer hold up against the tool results it came from (figures, grounding)."""
