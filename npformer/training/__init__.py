"""Training: the tasks and their data, the trainers, the experiment grid and its command line,
the learning-rate schedules (chapters 01-05, 07, 10 and 11).

Imports from ``npformer.core`` and from its own modules only.
"""
