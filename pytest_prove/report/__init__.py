"""Renderers: read the statistics engine's result objects, never recompute a statistic."""
