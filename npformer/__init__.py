"""npformer: the NumPy Transformer of the book *Attention, Derived*.

One module per concept; each module's docstring names the chapter that teaches it.
Import from the modules themselves, e.g. ``from npformer.attention import softmax``.
"""

__version__ = "0.1.0"
