"""Reading and testing what a model does: probes, interventions, circuits, direction ablation,
the bootstrap, the scaling of the scores (chapters 02, 10-12).

Imports from ``npformer.core``, ``npformer.training`` and its own modules only.
"""
