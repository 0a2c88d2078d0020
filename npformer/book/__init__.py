"""What the book's pages need around the model: the figure style, interactive figures,
``python -m npformer verify``, measuring, and the exercise checkers (``exercises/``).

The top layer: it may import from every other layer; nothing imports from it.
"""
