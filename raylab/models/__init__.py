"""Model definitions shared by recipes."""
