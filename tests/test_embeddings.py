"""The local embedding model: a cold search loads it without graph optimisation, and finds
the same things (the vectors agree to float rounding with the optimised model's)."""

from __future__ import annotations

import numpy as np

from bot.agent.memory.embeddings import MiniLMEmbedder


async def test_a_model_loaded_for_one_question_embeds_like_the_optimised_one() -> None:
    texts = [
        "What pets does Nate have?",
        "I adopted a greyhound called Biscuit last March",
        "ok",
    ]
    optimised = MiniLMEmbedder(threads=1)
    quick = MiniLMEmbedder(threads=1)
    quick.start_loading(optimise=False)
    await quick.close()  # waits for the load started in its thread
    a = optimised.embed_sync(texts)
    b = quick.embed_sync(texts)
    assert a.shape == b.shape == (3, 384)
    assert float(np.abs(a - b).max()) < 1e-4
    # Same neighbours: the question is nearest the greyhound, not the greeting.
    assert float(b[0] @ b[1]) > float(b[0] @ b[2])
    assert float(a[0] @ a[1]) > float(a[0] @ a[2])
