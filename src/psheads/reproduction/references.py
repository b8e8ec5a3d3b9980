"""The two papers psheads implements, and the numbers they report that psheads compares against.

Paper A introduces the positional/symbolic definitions, the exclusion principle, the per-frequency
analysis of pretrained LLMs and the canonical tasks; paper B the swap score, the number and letter
multi-hop tasks, the GPT-J training recipe, the theory constructions and length generalization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Paper:
    """A bibliographic reference.

    Attributes:
        key: how the docs and frames refer to it (``"A"``, ``"B"``).
        authors: author list.
        title: title.
        venue: where and when it appeared.
        url: where to read it.
    """

    key: str
    authors: str
    title: str
    venue: str
    url: str

    def citation(self) -> str:
        """One-line citation."""
        return f"{self.authors}. {self.title}. {self.venue}. {self.url}"


PAPER_A = Paper(
    key="A",
    authors="Felipe Urrutia, Jorge Salas, Alexander Kozachinskiy, Cristian Buc Calderon, Hector Pasten, "
            "Cristobal Rojas",
    title="Decoupling Positional and Symbolic Attention Behavior in Transformers",
    venue="International Conference on Learning Representations (ICLR) 2026; arXiv:2511.11579",
    url="https://arxiv.org/abs/2511.11579",
)

PAPER_B = Paper(
    key="B",
    authors="Felipe Urrutia, Juan José Alegría, Cinthia Sanchez Macias, Jorge Salas, Cristian B. Calderon, "
            "Cristobal Rojas",
    title="Positional versus Symbolic Attention Heads: Learning Dynamics, RoPE Geometry, and Length Generalization",
    venue="arXiv:2605.31558, 2026",
    url="https://arxiv.org/abs/2605.31558",
)

PSHEADS = Paper(
    key="psheads",
    authors="psheads",
    title="psheads' own prediction from paper B's Theorem 3.2 (not a claim of either paper)",
    venue="this package",
    url="",
)
"""The source of a claim psheads makes itself, graded like the papers' but labelled as its own."""

PAPER_B_TABLE_3: dict[str, dict[int, float]] = {
    "number": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                       (0.98, 0.87, 0.73, 0.45, 0.17, 0.14, 0.10, 0.08, 0.08, 0.06), strict=True)),
    "letter": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                       (0.96, 0.98, 1.0, 0.99, 0.99, 0.98, 0.96, 0.85, 0.52, 0.40), strict=True)),
}
"""Paper B, table 3: GPT 5.4's mean accuracy on the 1-hop number and letter tasks by target-window size
(GPT 5.5 and Claude Sonnet 3.7 show the same split: number 0.55 and 0.40 at 12 falling to 0.04 and
0.05 at 300; letter 0.87 and 0.92 at 12, 0.50 and 0.80 at 300)."""

PAPER_B_TABLE_3_RUNS: dict[str, dict[str, dict[int, tuple[float, float]]]] = {
    "GPT 5.4": {"number": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                                   ((0.98, 0.01), (0.87, 0.01), (0.73, 0.03), (0.45, 0.03), (0.17, 0.03), (0.14, 0.03),
                                    (0.1, 0.02), (0.08, 0.02), (0.08, 0.01), (0.06, 0.01)), strict=True)),
                "letter": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                                   ((0.96, 0.01), (0.98, 0.01), (1.0, 0.01), (0.99, 0.0), (0.99, 0.01), (0.98, 0.01),
                                    (0.96, 0.01), (0.85, 0.05), (0.52, 0.03), (0.4, 0.06)), strict=True))},
    "GPT 5.5": {"number": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                                   ((0.55, 0.02), (0.56, 0.03), (0.42, 0.03), (0.23, 0.01), (0.21, 0.03), (0.12, 0.02),
                                    (0.1, 0.02), (0.07, 0.02), (0.06, 0.01), (0.04, 0.01)), strict=True)),
                "letter": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                                   ((0.87, 0.02), (0.95, 0.01), (0.96, 0.02), (0.96, 0.01), (0.77, 0.01), (0.84, 0.02),
                                    (0.75, 0.01), (0.66, 0.04), (0.55, 0.01), (0.5, 0.03)), strict=True))},
    "Claude Sonnet 3.7": {"number": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                                             ((0.4, 0.02), (0.34, 0.03), (0.22, 0.02), (0.15, 0.02), (0.11, 0.01),
                                              (0.08, 0.03), (0.06, 0.01), (0.06, 0.02), (0.05, 0.01), (0.05, 0.01)),
                                             strict=True)),
                          "letter": dict(zip((12, 16, 24, 32, 48, 64, 80, 100, 200, 300),
                                             ((0.92, 0.03), (0.89, 0.02), (0.88, 0.03), (0.88, 0.02), (0.8, 0.02),
                                              (0.87, 0.02), (0.89, 0.02), (0.86, 0.03), (0.77, 0.02), (0.8, 0.05)),
                                             strict=True))},
}
"""Paper B, table 3 (appendix H): mean accuracy and standard deviation over five runs, per model,
task and target-window size."""

PAPER_B_FIGURE_5B: dict[str, dict[int, float]] = {
    "letter": {100: 0.998, 300: 0.987, 500: 0.954, 700: 0.914, 800: 0.891, 1000: 0.865, 5000: 0.484},
    "number": {40: 0.943, 50: 0.878, 100: 0.739, 200: 0.641, 300: 0.469, 1000: 0.202},
}
"""Paper B, figure 5B read from the PDF's vector paths (bands ±0.01–0.04): accuracy against x, the
tokens added to the 17-token prompt (x = 0: accuracy 1 for both models)."""

PAPER_B_FIGURE_2A: dict[int, dict[int, float]] = {
    1: {50: 0.012, 100: 0.014, 150: 0.046, 200: 0.06, 250: 0.089, 300: 0.084, 350: 0.087, 400: 0.115, 450: 0.132,
        500: 0.11, 550: 0.123, 600: 0.125, 650: 0.123, 700: 0.142, 750: 0.118, 800: 0.132, 850: 0.142, 900: 0.139,
        950: 0.144, 1000: 0.156, 1050: 0.175, 1150: 0.158, 1200: 0.153, 1250: 0.161, 1350: 0.165, 1400: 0.184,
        1450: 0.166, 1500: 0.197, 1550: 0.201, 1600: 0.228, 1650: 0.249, 1700: 0.319, 1750: 0.381, 1800: 0.429,
        1850: 0.569, 1950: 0.81, 2000: 0.897, 2050: 0.961, 2100: 0.988, 2150: 0.995, 2350: 1.0, 6750: 1.0},
    2: {50: 0.013, 100: 0.02, 150: 0.033, 200: 0.056, 250: 0.069, 300: 0.089, 350: 0.09, 400: 0.118, 450: 0.108,
        500: 0.123, 550: 0.111, 600: 0.113, 650: 0.139, 700: 0.12, 750: 0.123, 800: 0.123, 850: 0.126, 900: 0.138,
        1000: 0.133, 1050: 0.108, 1100: 0.133, 1150: 0.144, 1200: 0.141, 1250: 0.156, 1300: 0.134, 1350: 0.139,
        1400: 0.138, 1450: 0.156, 1500: 0.143, 1550: 0.157, 1600: 0.157, 1700: 0.151, 1750: 0.177, 1800: 0.157,
        1850: 0.167, 1900: 0.18, 1950: 0.177, 2000: 0.184, 2050: 0.207, 2100: 0.203, 2150: 0.19, 2200: 0.208,
        2250: 0.262, 2300: 0.279, 2350: 0.321, 2400: 0.375, 2450: 0.456, 2500: 0.549, 2550: 0.59, 2600: 0.72,
        2650: 0.772, 2700: 0.851, 2750: 0.921, 2800: 0.949, 2850: 0.974, 2900: 0.977, 2950: 0.984, 3000: 0.993,
        3100: 0.998, 3150: 0.99, 3200: 0.997, 3250: 0.998, 3300: 0.997, 3350: 1.0, 6750: 1.0},
    3: {50: 0.013, 150: 0.025, 200: 0.046, 250: 0.071, 300: 0.086, 350: 0.094, 450: 0.103, 500: 0.118, 550: 0.106,
        600: 0.106, 650: 0.125, 700: 0.133, 750: 0.118, 800: 0.106, 850: 0.137, 900: 0.14, 950: 0.106, 1000: 0.116,
        1050: 0.11, 1150: 0.113, 1200: 0.12, 1250: 0.137, 1300: 0.126, 1350: 0.13, 1450: 0.145, 1500: 0.133,
        1550: 0.118, 1600: 0.125, 1650: 0.128, 1700: 0.126, 1750: 0.145, 1850: 0.142, 1900: 0.147, 1950: 0.143,
        2000: 0.164, 2050: 0.16, 2100: 0.187, 2150: 0.206, 2200: 0.233, 2250: 0.241, 2300: 0.273, 2350: 0.28,
        2400: 0.317, 2450: 0.332, 2500: 0.344, 2550: 0.364, 2600: 0.371, 2650: 0.413, 2700: 0.43, 2750: 0.459,
        2800: 0.47, 2850: 0.476, 2900: 0.499, 3000: 0.673, 3050: 0.725, 3100: 0.766, 3150: 0.788, 3200: 0.862,
        3250: 0.906, 3300: 0.933, 3400: 0.941, 3450: 0.966, 3500: 0.976, 3550: 0.973, 3600: 0.983, 3650: 0.978,
        3800: 0.993, 3950: 0.99, 4000: 0.992, 4050: 0.998, 6750: 1.0},
    4: {50: 0.007, 100: 0.015, 150: 0.029, 200: 0.062, 250: 0.078, 300: 0.107, 350: 0.119, 400: 0.107, 450: 0.125,
        500: 0.114, 550: 0.107, 600: 0.121, 650: 0.114, 800: 0.125, 850: 0.121, 900: 0.125, 950: 0.114, 1000: 0.112,
        1050: 0.124, 1100: 0.121, 1150: 0.129, 1300: 0.117, 1350: 0.135, 1400: 0.134, 1500: 0.125, 1550: 0.142,
        1600: 0.14, 1650: 0.129, 1700: 0.14, 1750: 0.142, 1800: 0.15, 1850: 0.148, 1950: 0.125, 2000: 0.15,
        2100: 0.184, 2250: 0.223, 2300: 0.27, 2400: 0.277, 2450: 0.314, 2500: 0.335, 2550: 0.35, 2600: 0.311,
        2650: 0.345, 2700: 0.363, 2800: 0.41, 2850: 0.399, 2900: 0.477, 3000: 0.666, 3050: 0.72, 3100: 0.77,
        3150: 0.796, 3200: 0.852, 3250: 0.855, 3300: 0.896, 3350: 0.899, 3400: 0.909, 3450: 0.906, 3500: 0.917,
        3550: 0.933, 3600: 0.953, 3650: 0.94, 3700: 0.948, 3750: 0.948, 3900: 0.967, 3950: 0.959, 4000: 0.964,
        4050: 0.982, 4100: 0.972, 4250: 0.995, 4300: 0.99, 4350: 0.992, 4400: 0.997, 4450: 0.989, 4500: 0.997,
        4550: 0.998, 4600: 0.99, 4650: 0.997, 4750: 0.997, 4800: 1.0, 4850: 0.997, 4900: 1.0, 4950: 0.995, 5000: 1.0,
        5050: 0.995, 5250: 1.0, 5350: 0.998, 5400: 0.997, 5500: 0.998, 6750: 1.0},
}
"""Paper B, figure 2A, left panel (the number task), read from the PDF's vector paths (arXiv:2605.31558,
page 4): accuracy per hop count (1–4) against the training step, one point per evaluation, every 50
steps from step 50. The points are the path's own vertices: a step the path leaves out lies on the
straight segment between its neighbours (the plotting library drops collinear points), so
``rules.learning.figure_2a_curve`` interpolates linearly. Axes calibrated on the panel's grid lines,
which sit at the tick labels (steps 0–6,000 every 1,000; accuracy 0.0, 0.5, 1.0): the label centres lie
within 0.003 pt of their line in x and 0.135 pt (0.004 accuracy) in y, a straight line through the grid
lines leaves under 0.02 steps and 0.0001 accuracy, and every vertex lands within 0.03 steps of a
multiple of 50. Residual: the mean of the four curves against the panel's own "Acc. Global" line,
at that line's 87 vertices, at most 0.006 (RMS 0.002). Hop 3 leads hop 4 by at most 0.077 (step
2,850). The panel does not say how many prompts each point counts: its caption says the test set
(45,600 sequences, 11,400 per hop count), while the training code in the repository
jcalataiut-cli/CENIA (Position_symbolic_dynamics/code) evaluates during training on the validation
set (2,400 sequences, 600 per hop count)."""

PAPER_B_TABLE_1: dict[str, list[int]] = {
    "number": [1, 2, 2, 2, 10, 39, 38, 38, 38, 37, 37, 38],
    "letter": [18, 32, 42, 37, 40, 38, 41, 38, 41, 39, 38, 40],
}
"""Paper B, table 1: frequency ID per layer (layers 0–11) of the trained number and letter models.
Paper B publishes no formula for it; psheads' usage-weighted mean is a different definition."""


PAPER_A_BINDING = ("gemma-2-2b-it, a binding task with 256 entity–attribute pairs, layers 1–13 against 14–26; quoted "
                   "by a public summary of the ICLR paper (its section \"Example: whole model profile on binding "
                   "tasks\"), and the OpenReview discussion of submission V38yAoqddQ places the early-versus-late "
                   "and anti-correlation claims at the submission's lines 268–272")
"""Where paper A's gemma-2-2b-it values are located, as far as they can be: not in its arXiv text."""


@dataclass(frozen=True)
class Published:
    """A result one of the papers reports, as the reproduction report quotes it.

    Attributes:
        paper: ``PAPER_A`` or ``PAPER_B``.
        source: where in the paper (table or figure).
        claim: the result in words.
        value: the number(s) as published (None for a qualitative claim).
        found: whether the source was found in the paper's text; a claim whose source was not
            found is shown as "unverified: source not found" and gets no verdict.
    """

    paper: Paper
    source: str
    claim: str
    value: Any = None  # its shape depends on the claim
    found: bool = True

    @property
    def locator(self) -> str:
        """Where the claim is, as the report prints it."""
        if self.paper.key == PSHEADS.key:
            return f"psheads' prediction ({self.source})"
        return f"paper {self.paper.key}, {self.source}" if self.found else \
            f"paper {self.paper.key}: unverified: source not found ({self.source})"


PUBLISHED: dict[str, Published] = {
    "number_hop_by_hop": Published(PAPER_B, "figure 2A, §3.3", "the number task is learned hop by hop: 1 hop first, "
                                   "then 2, then 3 and 4 (§3.3: \"gradually learns 2-, 3-, and 4-hop conditions\"; "
                                   "in figure 2A hops 3 and 4 rise together, hop 3 ahead by at most 0.077)"),
    "letter_at_once": Published(PAPER_B, "figure 2A, §3.3", "the letter task learns every hop count nearly at once"),
    "number_positional_l0_l3": Published(PAPER_B, "figure 2C (red lines)", "number model: pure positional heads "
                                         "appear in layers 1, 0, 2 and 3, in that order (steps ~2,400–4,500)",
                                         (1, 0, 2, 3)),
    "number_symbolic_l4_l11": Published(PAPER_B, "figure 2C (green lines)", "number model: pure symbolic heads appear "
                                        "from layer 5 outwards (L5 → L6/L7 → L4/L8 → L9/L10 → L11, steps "
                                        "~2,700–3,000)", (5, 6, 7, 4, 8, 9, 10, 11)),
    "letter_symbolic_1_11": Published(PAPER_B, "figure 2C", "letter model: layers 1–11 become pure symbolic, and no "
                                      "layer pure positional", tuple(range(1, 12))),
    "index_flow": Published(PAPER_B, "§3.2, figure 3A", "number model, 4 hops: layer 0 maximally attends from the "
                            "last hop's number to its letter and copies it; layer 1 does so on the hop before; at the "
                            "last token layers 1 and 2 attend at the distance it holds, and layer 3 copies",
                            {"last_hop": (0,), "previous_hop": (1,), "query_hop": (1, 2)}),
    "index_flow_propagate": Published(PSHEADS, "psheads' reading of §3.2's \"from there on … information only needs "
                                      "to be propagated\" (paper B's words name no layer)", "number model, 4 hops: "
                                      "layers 4–11 follow no Index hop", tuple(range(4, 12))),
    "purity_gamma": Published(PAPER_B, "figure 7", "the cumulative counts of pure heads keep their shape for "
                              "γ = 0.1 and γ = 0.05 (a small shift; number model: positional 4 → 2, symbolic 8 → 7)",
                              {"positional": (4, 2), "symbolic": (8, 7)}),
    "pure_before_convergence": Published(PAPER_B, "figure 2A–C (timing)", "accuracy converges only once the "
                                         "heads have become pure"),
    "entropy_at_init": Published(PAPER_B, "§3.1", "attention entropy is high at initialisation"),
    "frequency_id_number": Published(PAPER_B, "table 1 (figure 8 per plane)", "number model, frequency ID per "
                                     "layer: fast planes in the positional layers 0–3 (ID 1–2), ID 10 in layer 4, slow "
                                     "planes from layer 5", PAPER_B_TABLE_1["number"]),
    "frequency_id_letter": Published(PAPER_B, "table 1 (figure 8 per plane)", "letter model, frequency ID per "
                                     "layer: slow planes throughout (18 in layer 0, 32–42 after)",
                                     PAPER_B_TABLE_1["letter"]),
    "letter_length": Published(PAPER_B, "§3.6, figure 5B", "the letter model stays above 90% accuracy up to ≈850 "
                               "tokens (53× the training length; figure 5B's x counts the tokens added to the 17-token "
                               "prompt, so L ≈ 867)", 850),
    "number_length": Published(PAPER_B, "figure 5B (read from the plot)", "the number model barely generalises "
                               "beyond its training length: accuracy ≈0.64 with 200 tokens added (L = 217) and ≈0.2 "
                               "with 1,000 (L = 1,017)", {200: 0.64, 1000: 0.2}),
    "letter_beyond_number": Published(PAPER_B, "§3.6, figure 5B", "the letter model's length generalization far "
                                      "exceeds the number model's"),
    "theory_decay": Published(PAPER_B, "§3.6 (figure 5A against 5B)", "the qualitative patterns of decay in the "
                              "trained models' length generalization closely resemble Theorem 3.2's bounds at their "
                              "angles"),
    "margins": Published(PSHEADS, "from Theorem 3.2 and Remark 3.2; paper B never measures trained heads' discrepancy",
                         "positional heads' worst-case discrepancy shrinks to zero with length, symbolic heads' stays "
                         "positive"),
    "theorem_3_1": Published(PAPER_B, "theorem 3.1", "one head on one RoPE plane solves Index (positional) and "
                             "Retrieval (symbolic) exactly up to a length n0"),
    "theorem_3_2": Published(PAPER_B, "theorem 3.2", "the discrepancy of those constructions is bounded above by "
                             "closed forms in the input length n (upper bounds only)"),
    "layer_1_geometry": Published(PAPER_B, "figure 4B–C (with figure 3A's distance)", "number model, layer 1: on its "
                                  "dominant plane (figure 4C's ID 1 by the per-plane maximum logit; that figure counts "
                                  "from 0, so psheads' plane 2) the keys are aligned and the query is rotated onto the "
                                  "key at the target position (distance 2 at the last token, figure 3A), as in "
                                  "Theorem 3.1's Index construction", {"plane": 2, "distance": 2}),
    "figure_5a": Published(PAPER_B, "figure 5A", "Theorem 3.2's bounds for n ≤ 100 at the angles of each trained "
                           "model's second layer: θ₂ = 0.8 (Index, frequency ID 2) falls towards 0, θ₄₂ = 0.0027 with "
                           "|ALPH| = 8 (Retrieval, frequency ID 42) stays bounded away from 0 (IDs 2 and 42 are "
                           "table 1's layer 2; layer 1 has 2 and 32)",
                           {"index": (0.8, 2), "retrieval": (0.0027, 42)}),
    "index_fast": Published(PAPER_A, "canonical tasks (a secondary summary: theorems 2–3)", "Index needs rotating "
                            "(fast) planes", found=False),
    "retrieval_slow": Published(PAPER_A, "canonical tasks (a secondary summary: theorems 4–5)", "Retrieval is solved "
                                "from slow or zero frequencies", found=False),
    "induction_both": Published(PAPER_A, "canonical tasks (a secondary summary: corollary 1, theorem 6)", "partial "
                                "induction needs rotating and static planes together", found=False),
    "llm_table_3": Published(PAPER_B, "table 3, §3.7", "frontier LLMs on the 1-hop tasks: the number task collapses by "
                             "windows of 32–100 items while the letter task holds (GPT 5.4: number 0.98 at 12, 0.08 at "
                             "100; letter 0.96 at 12, 0.85 at 100)", PAPER_B_TABLE_3),
    "llm_thresholds": Published(PAPER_B, "§3.7", "for all tested models, the number task drops below 0.5 at 32 items "
                                "and below 0.1 at 100; the letter task stays above 0.88 at 32 and above 0.65 at 100"),
    "llm_letter_above_number": Published(PAPER_B, "§3.7, figures 5C–D (table 3)", "for every tested LLM, accuracy "
                                         "on the letter task is consistently higher than on the number task"),
    "llm_early_late": Published(PAPER_A, PAPER_A_BINDING, "median positional score is higher in the first half of "
                                "the layers than in the second (0.83 against 0.56)", (0.83, 0.56), found=False),
    "llm_correlation": Published(PAPER_A, PAPER_A_BINDING, "positional and symbolic scores are anti-correlated across "
                                 "heads (r = −0.91)", -0.91, found=False),
}
"""Every published result the reproduction report (``psheads.reproduction.report``) puts beside a
measurement. Paper A's values could not be found in its arXiv text (only a secondary summary
quotes them), so they are marked ``found=False``."""

NOT_TESTED: dict[str, tuple[Published, str]] = {
    "remark_3_1": (Published(PAPER_B, "remark 3.1 (appendix F.2.3)", "Index cannot be realised by a purely symbolic "
                             "head, nor Retrieval by a purely positional one"),
                   "an impossibility proof: no finite experiment confirms it, and psheads' gating sweep closes "
                   "planes rather than forcing heads to be pure"),
    "figure_3b": (Published(PAPER_B, "§3.2, figure 3B", "the letter task's information flow follows the Retrieval "
                            "hops as the number task's follows Index"),
                  "psheads traces hop paths for the number task only; the letter task's generator does not yet "
                  "return the positions each hop visits"),
    "layer_11_gating": (Published(PAPER_B, "§3.3", "the letter model acquires every hop count nearly at once because "
                                  "each needs the last symbolic head, in layer 11"),
                        "a causal claim about timing: it needs layer 11's purity step compared with each hop count's "
                        "learning step under an intervention, which psheads does not run"),
    "figure_8_profiles": (Published(PAPER_B, "figure 8 (appendix G)", "per-plane frequency-use profiles of every "
                                    "layer"),
                          "paper B publishes the profiles only as a figure; psheads grades their summary, table 1, "
                          "and draws its own profiles beside it"),
}
"""Claims of paper B the report lists without a verdict, each with the reason it is not tested."""
