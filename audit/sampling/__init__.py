"""The sampling layer: the mechanism's outputs, drawn in seeded chunks in forked children."""
