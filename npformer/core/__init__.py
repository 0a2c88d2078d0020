"""The Transformer itself: attention, masks, positions, the block, the decoder and the
encoder-decoder, the KV cache, blocked attention, Adam and gradient checks (chapters 01-09).

The lowest layer: its modules import only from one another.
"""
