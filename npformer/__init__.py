"""npformer: the NumPy Transformer of the book *Attention, Derived*.

One module per concept; each module's docstring names the chapter that teaches it. The modules
sit in four layers, low to high; a module imports only from its own layer or lower ones
(``tests/test_layers.py`` checks it):

- ``npformer.core``: the Transformer itself (attention, masks, positions, the block, the decoder
  and the encoder-decoder, the KV cache, blocked attention, Adam, gradient checks);
- ``npformer.training``: tasks and their data, the trainers, the experiment grid and its command
  line, learning-rate schedules;
- ``npformer.analysis``: reading and testing a trained model (probes, interventions, circuits,
  direction ablation, the bootstrap, the scaling of the scores);
- ``npformer.book``: what the pages need around the model (plotting, interactive figures,
  ``verify``, measuring, the exercise checkers).

Import from the modules themselves, e.g. ``from npformer.core.attention import softmax``.
"""

__version__ = "0.1.0"
