"""Paper B's number and letter tasks and paper A's Binding task as few-shot prompts for pretrained LLMs.

Paper B (Urrutia et al., arXiv 2605.31558) tests LLMs on 1-hop versions of its two tasks written as
few-shot natural-language instructions with single-token answers; paper A (arXiv 2511.11579) has a
Binding task ("Alice likes tea. ... What does Bob like?"). These tasks rebuild all three for any
Hugging Face tokenizer:

- ``LLMNumberTask`` (``"llm-number"``, positional): a list of words, then a position counted back
  from its end; the answer is the word found by counting (the 1-hop analogue of "an integer v at
  position p points to position p − v"). Words repeat, so only the position identifies the answer.
- ``LLMLetterTask`` (``"llm-letter"``, symbolic): ``key=value`` pairs with distinct keys, then a
  key; the answer is the value of the one earlier pair with that key.
- ``BindingTask`` (``"binding"``, symbolic): "Name likes thing." facts with distinct names, then
  "What does Name like?".

A task is a frozen dataclass whose fields are tokenizer-independent (``window``: items in the
target window; ``shots``: solved examples before the question; ``shot_window``: items in each of
them; the word lists). It generates token ids once it is built for a tokenizer:
``task.for_tokenizer(tokenizer)`` (or ``tokenizer=`` in the constructor), which checks that every
answer word and key is a single token and raises ``ValueError`` otherwise. Every prompt of a window
has the same token length, every ``TaskBatch`` carries its ``candidates`` (the answer words' ids)
and ``hops`` is 1.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor

from psheads.interface import validation
from psheads.tasks.base import TaskBatch, balanced, register_task

# The word lists. Every word is a single Gemma-3 token in the form a task uses (checked when a
# task is built for a tokenizer). Keys and names are filtered per tokenizer; answer words are not.
MIN_DEFAULT_VALUES = 8
"""Default answer words a tokenizer must keep as single tokens (the rest of the list is left out)."""

ITEMS: tuple[str, ...] = tuple("""
    cat dog sun box car tree book fish bird door hat cup ball pen bed egg map star ship milk ring bell moon
    lamp
""".split())
"""The words of ``LLMNumberTask`` and the values of ``LLMLetterTask``: its answers and candidates."""

LIKES: tuple[str, ...] = tuple("""
    tea coffee chess jazz golf pizza soup cake rice bread milk tennis music poetry football cheese honey wine
    pasta hockey art history dancing chocolate
""".split())
"""What people like in ``BindingTask``: its answers and candidates."""

KEYS: tuple[str, ...] = tuple("""
    apple river stone cloud table chair window garden forest mountain ocean island desert valley bridge castle
    tower village city market school church office kitchen bottle basket bucket candle carpet mirror pillow
    blanket button pocket jacket shirt dress skirt glove scarf boot sock belt wallet ticket paper pencil brush
    paint knife fork spoon plate bowl glass jar pot pan oven stove fridge sink towel soap comb clock watch
    phone camera radio piano guitar violin flute trumpet horn whistle hammer nail screw drill saw shovel rake
    ladder rope chain wire pipe wheel engine wing tail horse cow pig sheep goat duck chicken mouse rat rabbit
    fox wolf bear lion tiger zebra monkey snake frog turtle whale shark dolphin crab spider bee ant fly worm
    leaf flower grass seed root branch bush wood sand rock hill lake pond stream wave beach shore field farm
    barn fence gate wall roof floor room hall stair corner street road path track train plane truck bus bike
    wagon cart rocket planet comet storm wind snow ice fire smoke ash dust mud clay iron gold silver copper
    steel plastic cotton silk wool leather rubber bread butter sugar salt pepper honey jam juice water wine
    beer soda tea coffee cream cheese meat beef pork lamb bacon ham sausage turkey salmon tuna shrimp lobster
    corn bean pea carrot potato tomato onion garlic lemon orange banana grape cherry peach pear plum melon
    berry nut olive mango coconut pumpkin cabbage lettuce spinach doctor nurse teacher farmer baker driver
    pilot sailor soldier painter singer dancer writer poet judge lawyer king queen prince princess knight
    wizard witch giant dragon ghost angel devil hero thief pirate captain chief army navy police court prison
    bank hotel museum library theater cinema stadium airport station harbor factory hospital pharmacy bakery
    shop store mall park zoo circus yard pool gym club party game match race prize medal trophy award gift
    card note song poem story novel movie show play film picture photo image sign symbol idea plan dream hope
    fear anger joy love peace war battle enemy friend family mother father brother sister uncle aunt cousin
    baby child girl boy man woman lady person people crowd group team nation country state county town capital
    border coast north south east west spring summer autumn winter morning evening night day week month year
    hour minute second moment century circle square triangle line point angle curve edge center middle top
    bottom side front back left right red blue green yellow purple pink brown black white gray violet crimson
    rain thunder lightning rainbow fog mist frost hail breeze tornado motor battery cable switch screen
    keyboard printer laptop tablet robot signal sensor
""".split())
"""The keys of ``LLMLetterTask`` (none is in ``ITEMS``)."""

NAMES: tuple[str, ...] = tuple("""
    James John Robert Michael William David Richard Joseph Thomas Charles Christopher Daniel Matthew Anthony
    Mark Donald Steven Paul Andrew Joshua Kenneth Kevin Brian George Timothy Ronald Edward Jason Jeffrey Ryan
    Jacob Gary Nicholas Eric Jonathan Stephen Larry Justin Scott Brandon Benjamin Samuel Gregory Alexander
    Frank Patrick Raymond Jack Dennis Jerry Tyler Aaron Jose Adam Nathan Henry Douglas Zachary Peter Kyle
    Ethan Walter Noah Jeremy Christian Keith Roger Terry Gerald Harold Sean Austin Carl Arthur Lawrence Dylan
    Jesse Jordan Bryan Billy Joe Bruce Gabriel Logan Albert Willie Alan Juan Wayne Elijah Randy Roy Vincent
    Ralph Eugene Russell Bobby Mason Philip Louis Mary Patricia Jennifer Linda Elizabeth Barbara Susan Jessica
    Sarah Karen Lisa Nancy Betty Margaret Sandra Ashley Kimberly Emily Donna Michelle Carol Amanda Dorothy
    Melissa Deborah Stephanie Rebecca Sharon Laura Cynthia Kathleen Amy Angela Shirley Anna Brenda Pamela Emma
    Nicole Helen Samantha Katherine Christine Debra Rachel Carolyn Janet Catherine Maria Heather Diane Ruth
    Julie Olivia Joyce Virginia Victoria Kelly Lauren Christina Joan Evelyn Judith Megan Andrea Cheryl Hannah
    Jacqueline Martha Gloria Teresa Ann Sara Madison Frances Kathryn Janice Jean Abigail Alice Julia Judy
    Sophia Grace Denise Amber Doris Marilyn Danielle Beverly Isabella Theresa Diana Natalie Brittany Charlotte
    Marie Kayla Alexis Lori Bob Tom Tim Jim Bill Ben Sam Max Leo Luke Ian Alex Tony Mike Nick Steve Dave Chris
    Matt Dan Fred Ted Ray Ron Carlos Luis Pedro Miguel Diego Pablo Marco Mario Paolo Hans Karl Otto Emil Felix
    Oscar Hugo Victor Ivan Igor Boris Omar Ali Ahmed Hassan Yusuf Raj Ravi Arjun Amit Hiro Yuki Anne Jane Kate
    Lucy Rose Ella Mia Zoe Chloe Lily Ruby Eva Nora Clara Sofia Elena Irene Paula Monica Rita Tina Nina Vera
    Olga Ingrid Greta Heidi Astrid Fatima Aisha Leila Priya Maya Mei Carmen Lucia Isabel Beatriz Marta Sylvia
    Wendy Holly Ivy Iris Daisy Violet Hazel Stella Luna Aurora Bella Sophie Amelia Ava Harper Avery Scarlett
    Aria Penelope Riley Lillian Addison Eleanor Natalia Hailey Leah Audrey Savannah Brooklyn Claire Caroline
    Emilia Kennedy Willow Naomi Ariana Allison Gabriella Cora Autumn Valentina Isla Quinn Sadie Piper Lydia
    Alexa Josephine Vivian Madeline Liam Oliver Lucas Aiden Jackson Sebastian Owen Carter Wyatt Grayson Levi
    Isaac Lincoln Asher Theodore Caleb Hunter Isaiah Eli Josiah Connor Adrian Colton Cameron Nolan Easton
    Dominic Landon Ezra Cooper Parker Axel Evan Miles Chase Declan Silas Xavier Kai Roman Micah Harrison
    Bennett Ryder Weston Emmett Beau Tristan Rowan Everett Santiago Maxwell Amir Wesley Brody Hudson Preston
    Luca Finn Milo Jasper Otis Rhys Seth Cole Blake Grant Troy Dean Neil Glen Craig Derek Curtis Travis Shane
    Brent Clark Dale Lance Mitchell Howard Stanley Leonard Herbert Clifford Bernard Hugh Gordon Duncan Malcolm
    Angus Fergus Niall Conor Rory Brendan Colin Kieran Aidan Martin Simon Lewis Morgan Harvey Edgar Francis
    Julian Marcus Nathaniel Spencer Wallace Warren Frederick Ernest Norman Roland Rudolph Franklin Leon
    Lorenzo Giovanni Antonio Francesco Alessandro Roberto Stefano Matteo Fernando Rafael Ricardo Sergio
    Eduardo Javier Alejandro Manuel Andres Emilio Ramon Raul Ruben Salvador Ahmad Khalid Samir Karim Nadia
    Zara Sana Noor Sunil Vijay Anil Sanjay Rahul Deepak Pooja Kiran Akira Ren Sora Hana Jin Min Jun Hyun Ji
    Lars Sven Erik Nils Olaf Anders Magnus Henrik Johan Jens Soren Elsa Petra Klaus Dieter Jurgen Wolfgang
    Stefan Markus Tobias Florian Lukas Jonas Moritz Pierre Jacques Michel Philippe Alain Claude Antoine
    Nicolas Julien Mathieu Camille Juliette Margot Elise Celine Monique Sylvie Nathalie
""".split())
"""The people of ``BindingTask``."""


class _TokenizerVocabulary(Sequence):
    """A tokenizer's tokens by id, looked up lazily: ``vocabulary[i]`` is token ``i``."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._size = len(tokenizer)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        position = operator.index(index)
        position = position + self._size if position < 0 else position
        if not 0 <= position < self._size:
            raise IndexError(f"token id {index} is outside the vocabulary of {self._size} tokens")
        return str(self._tokenizer.convert_ids_to_tokens(position))


class _Encoder:
    """Token ids of prompt fragments (cached) and single-token checks of word lists."""

    def __init__(self, tokenizer: Any, task: str) -> None:
        if not callable(tokenizer) or not hasattr(tokenizer, "convert_ids_to_tokens"):
            raise TypeError(f"{task}: tokenizer must be a Hugging Face tokenizer (e.g. model.tokenizer), got "
                            f"{type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.task = task
        self.unknown = getattr(tokenizer, "unk_token_id", None)
        self._cache: dict[str, tuple[int, ...]] = {}

    def many(self, texts: Sequence[str]) -> list[list[int]]:
        return [list(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def __call__(self, text: str) -> tuple[int, ...]:
        if text not in self._cache:
            self._cache[text] = tuple(self.many([text])[0])
        return self._cache[text]

    def _single(self, forms: Sequence[str], after: str = "") -> list[int | None]:
        """Each form's token id, or None where it is not one known token, alone and after the text
        ``after`` (a tokenizer may merge a word with what precedes it: Qwen2.5 reads ``=sun`` as
        ``=s`` ``un``)."""
        alone = [ids[0] if len(ids) == 1 and ids[0] != self.unknown else None for ids in self.many(forms)]
        if not after:
            return alone
        prefix = list(self(after))
        return [token if token is not None and ids == [*prefix, token] else None
                for token, ids in zip(alone, self.many([after + form for form in forms]), strict=True)]

    def words(self, words: Sequence[str], space: bool, what: str, after: str = "") -> tuple[list[str], list[int]]:
        """Forms and ids of ``words``, each of which must be its own single token (also after ``after``)."""
        forms = [" " + word if space else word for word in words]
        ids = self._single(forms, after)
        bad = [word for word, token in zip(words, ids, strict=True) if token is None]
        where = "with a leading space" if space else "without a leading space"
        where += f", alone and after {after!r}," if after else ""
        if bad:
            raise ValueError(f"{self.task}: every {what} must be a single token {where} in this tokenizer; "
                             f"{len(bad)} are not: {bad[:10]}{' …' if len(bad) > 10 else ''}. Pass other words as "
                             "`values`.")
        if len(set(ids)) != len(ids):
            raise ValueError(f"{self.task}: two {what}s share a token in this tokenizer; pass distinct words.")
        return forms, [int(token) for token in ids]  # type: ignore[arg-type]

    def filtered(self, words: Sequence[str], space: bool, needed: int, what: str,
                 avoid: set[int], option: str = "keys", after: str = "") -> tuple[list[str], list[int]]:
        """The forms and ids of the ``words`` that are single tokens, also after ``after`` (distinct, none
        in ``avoid``)."""
        forms, ids, seen = [], [], set(avoid)
        for word, token in zip(words, self._single([" " + w if space else w for w in words], after), strict=True):
            if token is not None and token not in seen:
                forms.append(" " + word if space else word)
                ids.append(token)
                seen.add(token)
        if len(ids) < needed:
            raise ValueError(f"{self.task}: this needs {needed} {what}s that are single tokens in this tokenizer; "
                             f"only {len(ids)} of the {len(words)} listed are. Pass more words as `{option}` or a "
                             "smaller window.")
        return forms, ids


class _Prompt:
    """A prompt under construction: its text and token ids, fragment by fragment.

    Consecutive text fragments are tokenised together (a tokenizer may merge across their
    boundary: Qwen2.5 reads ``".\n\n"`` as one token), so only the boundaries around words matter.
    """

    def __init__(self, encode: _Encoder, bos: list[int]) -> None:
        self._encode = encode
        self._ids = list(bos)
        self._pending = ""
        self.parts: list[str] = []

    def _flush(self) -> None:
        if self._pending:
            self._ids.extend(self._encode(self._pending))
            self._pending = ""

    @property
    def ids(self) -> list[int]:
        """The token ids so far."""
        self._flush()
        return self._ids

    def text(self, text: str) -> None:
        self._pending += text
        self.parts.append(text)

    def word(self, form: str, token: int) -> int:
        """Add a single-token word; return its position."""
        self._flush()
        self.parts.append(form)
        self._ids.append(token)
        return len(self._ids) - 1


@dataclass(frozen=True)
class _Built:
    """What a task derives from its tokenizer."""

    encode: _Encoder
    bos: list[int]
    values: list[str]
    value_ids: list[int]
    keys: list[str] = field(default_factory=list)
    key_ids: list[int] = field(default_factory=list)


def _draw(size: int, count: int, generator: torch.Generator) -> list[int]:
    """``count`` indices below ``size``, with repetition."""
    return torch.randint(size, (count,), generator=generator).tolist() if count else []


def _words(value: Any, name: str, minimum: int) -> tuple[str, ...] | None:
    """A word list option: None (the built-in list) or distinct non-empty words without whitespace."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a list of words (or None for the built-in list), got {type(value).__name__}.")
    words = tuple(value)
    for word in words:
        if not isinstance(word, str) or not word or any(ch.isspace() for ch in word):
            raise ValueError(f"{name} must hold non-empty words without whitespace, got {word!r}.")
    if len(set(words)) != len(words):
        raise ValueError(f"{name} must not repeat words.")
    if len(words) < minimum:
        raise ValueError(f"{name} needs at least {minimum} words, got {len(words)}.")
    return words


class _LLMTask:
    """What the three tasks share: options, building for a tokenizer, batch assembly."""

    name: str
    window: int
    shots: int
    shot_window: int
    values: tuple[str, ...] | None
    tokenizer: Any
    prepend_bos: bool
    _built: _Built | None
    if TYPE_CHECKING:  # each task is a frozen dataclass (dataclasses.replace)
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    _DEFAULT_VALUES: tuple[str, ...] = ()
    _VALUE_SPACE = True
    _VALUE_AFTER = ""  # the text a value follows where it is not a word boundary (the letter task's "=")

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:  # a frozen dataclass
            object.__setattr__(self, name, value)

        put("window", validation.integer(self.window, "window", minimum=1))
        put("shots", validation.integer(self.shots, "shots", minimum=0))
        put("shot_window", validation.integer(self.shot_window, "shot_window", minimum=1))
        put("prepend_bos", validation.boolean(self.prepend_bos, "prepend_bos"))
        put("values", _words(self.values, "values", minimum=2))
        self._check_options()
        put("_built", None if self.tokenizer is None else self._build(_Encoder(self.tokenizer, repr(self.name))))

    def _check_options(self) -> None:
        """Task-specific option checks."""

    def _build(self, encode: _Encoder) -> _Built:
        bos_id = getattr(self.tokenizer, "bos_token_id", None)
        bos = [int(bos_id)] if self.prepend_bos and bos_id is not None else []
        if self.values is None:  # the defaults that are single tokens in this tokenizer (recorded in answer_words)
            values, value_ids = encode.filtered(self._DEFAULT_VALUES, self._VALUE_SPACE, MIN_DEFAULT_VALUES, "value",
                                                avoid=set(), option="values", after=self._VALUE_AFTER)
        else:  # the user's words, every one of them
            values, value_ids = encode.words(self.values, self._VALUE_SPACE, "value", after=self._VALUE_AFTER)
        return _Built(encode, bos, values, value_ids)

    def for_tokenizer(self, tokenizer: Any) -> Any:
        """This task built for ``tokenizer`` (a copy; every word list is checked against it).

        Raises:
            TypeError: ``tokenizer`` is not a Hugging Face tokenizer.
            ValueError: an answer word is not a single token, or too few keys are.
        """
        return dataclasses.replace(self, tokenizer=tokenizer)

    @property
    def built(self) -> bool:
        """Whether the task is built for a tokenizer (and can generate)."""
        return self._built is not None

    def _require(self) -> _Built:
        if self._built is None:
            raise ValueError(f"Task {self.name!r} has no tokenizer yet: build it with task.for_tokenizer("
                             "model.tokenizer) or pass tokenizer=... (psheads.measure.evaluation.evaluate does it for "
                             "you).")
        return self._built

    @property
    def vocabulary(self) -> Sequence[str]:
        """The tokenizer's tokens by id (token i is ``vocabulary[i]``); empty without a tokenizer."""
        return _TokenizerVocabulary(self.tokenizer) if self.tokenizer is not None else ()

    @property
    def answer_words(self) -> list[str]:
        """The answer words as they appear in a prompt (with their leading space, if any)."""
        return list(self._require().values)

    @property
    def candidates(self) -> Tensor:
        """``[c]`` token ids of the answer words: the candidates of every prompt."""
        return torch.tensor(self._require().value_ids, dtype=torch.long)

    @property
    def answer_ids(self) -> Tensor:
        """The token ids an answer can take: ``candidates``."""
        return self.candidates

    def with_window(self, window: int) -> Any:
        """This task with a target window of ``window`` items."""
        return dataclasses.replace(self, window=window)

    def _prompt(self, prompt: _Prompt, built: _Built, slot: int, answer: int, generator: torch.Generator) -> int:
        """Write one prompt whose answer is value ``answer`` at window slot ``slot``; return its position."""
        raise NotImplementedError

    def generate(self, n: int, seed: int = 0) -> TaskBatch:
        """``n`` prompts of one token length, deterministic in ``seed`` (and the tokenizer).

        Answer words and answer slots (0…window−1 in the target window) are each balanced (±1),
        in a seeded random order.

        Raises:
            ValueError: the task has no tokenizer, or the tokenizer does not tokenize a prompt as
                the concatenation of its parts.
        """
        n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
        built = self._require()
        generator = torch.Generator().manual_seed(seed)
        slots = balanced(list(range(self.window)), n, generator)
        answers = balanced(list(range(len(built.value_ids))), n, generator)
        prompts, positions = [], []
        for slot, answer in zip(slots.tolist(), answers.tolist(), strict=True):
            prompt = _Prompt(built.encode, built.bos)
            positions.append(self._prompt(prompt, built, slot, answer, generator))
            prompts.append(prompt)
        texts = ["".join(prompt.parts) for prompt in prompts]
        for row, (prompt, ids) in enumerate(zip(prompts, built.encode.many(texts), strict=True)):
            if ids != prompt.ids[len(built.bos):]:
                raise ValueError(f"Task {self.name!r}: this tokenizer does not tokenize prompt {row} as the "
                                 f"concatenation of its parts, so the answer position is unknown: {texts[row]!r}.")
        lengths = {len(prompt.ids) for prompt in prompts}
        if len(lengths) != 1:  # pragma: no cover - the prompts are built to one length
            raise ValueError(f"Task {self.name!r}: prompts of different lengths {sorted(lengths)}.")
        tokens = torch.tensor([prompt.ids for prompt in prompts], dtype=torch.long)
        answer_positions = torch.tensor(positions, dtype=torch.long)
        answer_ids = torch.tensor(built.value_ids, dtype=torch.long)[answers]
        return TaskBatch(tokens, answer_ids, torch.ones(n, dtype=torch.long), answer_positions, texts,
                         [built.values[i] for i in answers.tolist()],
                         candidates=torch.tensor(built.value_ids, dtype=torch.long))


@dataclass(frozen=True)
class LLMNumberTask(_LLMTask):
    """Positional: count back ``k`` words from the end of a list (``"llm-number"``).

    The 1-hop number task of paper B for pretrained LLMs. Every list holds words drawn with
    repetition from ``values`` (the answer word may occur elsewhere in the list too), so only its
    position identifies the answer; the question gives the position ``k`` counted from the end (1 is
    the last word), for an answer ``k`` items before the question. Example (``window=6``,
    ``shots=1``, ``shot_window=4``)::

        Each list is followed by a position counted back from its end (position 1 is the last word).
        Answer with the word at that position.

        List: egg sun cup sun
        Position 3 from the end: sun

        List: map cat bed ring cat star
        Position 5 from the end: → " cat"

    Numbers take more tokens as they grow (``" 17"`` is three Gemma tokens, ``" 7"`` two), so the
    first list of a prompt starts with as many extra words as its numbers are shorter than the
    longest ones: every prompt of a window has the same token length.

    Attributes:
        window: items in the target window (the list the question is about).
        shots: solved examples before the question (each a short list with its question and answer).
        shot_window: items in the list of each solved example.
        tokenizer: the Hugging Face tokenizer the prompts are written for (``model.tokenizer``);
            None until ``for_tokenizer``.
        prepend_bos: start every prompt with the tokenizer's BOS token (if it has one), as
            TransformerLens does for strings.
        values: the words, each one token with a leading space (default: the words of
            ``ITEMS`` that are, at least ``MIN_DEFAULT_VALUES`` of them).
    """

    window: int = 32
    shots: int = 3
    shot_window: int = 8
    values: tuple[str, ...] | None = None
    tokenizer: Any = field(default=None, repr=False, compare=False)
    prepend_bos: bool = True
    name: str = field(default="llm-number", init=False)
    _built: _Built | None = field(default=None, init=False, repr=False, compare=False)

    _DEFAULT_VALUES = ITEMS
    INTRO = ("Each list is followed by a position counted back from its end (position 1 is the last word). "
             "Answer with the word at that position.")
    LIST = "\n\nList:"
    QUERY = "\nPosition {k} from the end:"

    def _query_lengths(self, built: _Built, top: int) -> int:
        return max(len(built.encode(self.QUERY.format(k=k))) for k in range(1, top + 1))

    def _prompt(self, prompt: _Prompt, built: _Built, slot: int, answer: int, generator: torch.Generator) -> int:
        size, encode = len(built.value_ids), built.encode
        lists = []
        for _ in range(self.shots):
            words = _draw(size, self.shot_window, generator)
            lists.append((words, int(torch.randint(1, self.shot_window + 1, (1,), generator=generator))))
        target = _draw(size, self.window, generator)
        target[slot] = answer
        lists.append((target, self.window - slot))
        longest = {self.window: self._query_lengths(built, self.window)}
        if self.shots:
            longest[self.shot_window] = self._query_lengths(built, self.shot_window)
        missing = sum(longest[len(words)] - len(encode(self.QUERY.format(k=k))) for words, k in lists)
        lists[0] = (_draw(size, missing, generator) + lists[0][0], lists[0][1])
        prompt.text(self.INTRO)
        for index, (words, k) in enumerate(lists):
            prompt.text(self.LIST)
            positions = [prompt.word(built.values[w], built.value_ids[w]) for w in words]
            prompt.text(self.QUERY.format(k=k))
            if index < self.shots:
                prompt.word(built.values[words[-k]], built.value_ids[words[-k]])
        return positions[-k]


@dataclass(frozen=True)
class _LookupTask(_LLMTask):
    """Symbolic tasks: pairs with distinct keys, then a key; the answer is that pair's value.

    The options are declared once here; each task only names itself (its ``name`` default).
    """

    window: int = 32
    shots: int = 3
    shot_window: int = 8
    values: tuple[str, ...] | None = None
    keys: tuple[str, ...] | None = None
    tokenizer: Any = field(default=None, repr=False, compare=False)
    prepend_bos: bool = True
    name: str = field(default="", init=False)
    _built: _Built | None = field(default=None, init=False, repr=False, compare=False)

    _DEFAULT_KEYS: ClassVar[tuple[str, ...]] = ()
    _KEY_NAME = "key"
    INTRO: ClassVar[str]  # each task's own
    LIST = ""

    def _check_options(self) -> None:
        object.__setattr__(self, "keys", _words(self.keys, "keys", minimum=2))

    def _build(self, encode: _Encoder) -> _Built:
        base = super()._build(encode)
        needed = max(self.window, self.shot_window + 1 if self.shots else 0)
        keys, key_ids = encode.filtered(self.keys or self._DEFAULT_KEYS, True, needed, self._KEY_NAME,
                                        avoid=set(base.value_ids))
        return dataclasses.replace(base, keys=keys, key_ids=key_ids)

    def _pair(self, prompt: _Prompt, built: _Built, key: int, value: int) -> int:
        """Write one pair; return the position of its value."""
        raise NotImplementedError

    def _query(self, prompt: _Prompt, built: _Built, key: int) -> None:
        raise NotImplementedError

    def _prompt(self, prompt: _Prompt, built: _Built, slot: int, answer: int, generator: torch.Generator) -> int:
        n_keys, n_values = len(built.key_ids), len(built.value_ids)
        keys = torch.randperm(n_keys, generator=generator)[: self.window].tolist()
        values = _draw(n_values, self.window, generator)
        values[slot] = answer
        lists = []
        for _ in range(self.shots):  # never the question's key: it occurs once in the prompt
            others = torch.randperm(n_keys - 1, generator=generator)[: self.shot_window].tolist()
            shot_keys = [k + (k >= keys[slot]) for k in others]
            lists.append((shot_keys, _draw(n_values, self.shot_window, generator),
                          int(torch.randint(self.shot_window, (1,), generator=generator))))
        lists.append((keys, values, slot))
        prompt.text(self.INTRO)
        for index, (pair_keys, pair_values, asked) in enumerate(lists):
            prompt.text(self.LIST)
            positions = [self._pair(prompt, built, k, v) for k, v in zip(pair_keys, pair_values, strict=True)]
            self._query(prompt, built, pair_keys[asked])
            if index < self.shots:
                prompt.word(built.values[pair_values[asked]], built.value_ids[pair_values[asked]])
        return positions[slot]


@dataclass(frozen=True)
class LLMLetterTask(_LookupTask):
    """Symbolic: the value of the one earlier ``key=value`` pair with the asked key (``"llm-letter"``).

    The 1-hop letter task of paper B for pretrained LLMs: the question's key occurs in exactly one
    earlier pair of the prompt (the solved examples never use it), so only matching it identifies
    the answer. Keys are distinct within a list; values repeat. The value is written without a
    space after ``=``, in the list and as the answer. Example (``window=4``, ``shots=1``,
    ``shot_window=3``)::

        Each list pairs keys with values as key=value. Answer with the value of the queried key.

        Pairs: wolf=cup ship=hat lamp=egg
        Query: ship=hat

        Pairs: clock=sun bowl=map river=sun cloud=bell
        Query: river= → "sun"

    Attributes:
        window: items in the target window (the list the question is about).
        shots: solved examples before the question (each a short list with its question and answer).
        shot_window: items in the list of each solved example.
        tokenizer: the Hugging Face tokenizer the prompts are written for (``model.tokenizer``);
            None until ``for_tokenizer``.
        prepend_bos: start every prompt with the tokenizer's BOS token (if it has one), as
            TransformerLens does for strings.
        values: the values (default: the words of ``ITEMS`` that are); each must be one token without a
            leading space, alone and after ``=``.
        keys: the keys (default ``KEYS``); those that are one token with a leading space are used,
            and ``window`` of them must be.
    """

    name: str = field(default="llm-letter", init=False)

    _DEFAULT_VALUES = ITEMS
    _DEFAULT_KEYS = KEYS
    _VALUE_SPACE = False
    _VALUE_AFTER = "="
    INTRO = "Each list pairs keys with values as key=value. Answer with the value of the queried key."
    LIST = "\n\nPairs:"
    QUERY = "\nQuery:"

    def _pair(self, prompt: _Prompt, built: _Built, key: int, value: int) -> int:
        prompt.word(built.keys[key], built.key_ids[key])
        prompt.text("=")
        return prompt.word(built.values[value], built.value_ids[value])

    def _query(self, prompt: _Prompt, built: _Built, key: int) -> None:
        prompt.text(self.QUERY)
        prompt.word(built.keys[key], built.key_ids[key])
        prompt.text("=")


@dataclass(frozen=True)
class BindingTask(_LookupTask):
    """Symbolic: "Alice likes tea. … What does Bob like?" (paper A's Binding task, ``"binding"``).

    Names are distinct within a list and the asked name occurs in exactly one earlier fact (the
    solved examples never use it); liked things repeat. Example (``window=3``, ``shots=1``,
    ``shot_window=2``)::

        Read the facts, then answer the question with one word.

        Facts: Nora likes golf. Ivan likes tea.
        Question: What does Nora like?
        Answer: golf

        Facts: Paul likes jazz. Emma likes rice. Omar likes jazz.
        Question: What does Emma like?
        Answer: → " rice"

    Attributes:
        window: items in the target window (the list the question is about).
        shots: solved examples before the question (each a short list with its question and answer).
        shot_window: items in the list of each solved example.
        tokenizer: the Hugging Face tokenizer the prompts are written for (``model.tokenizer``);
            None until ``for_tokenizer``.
        prepend_bos: start every prompt with the tokenizer's BOS token (if it has one), as
            TransformerLens does for strings.
        values: what people like (default ``LIKES``); each must be one token with a leading space.
        keys: the names (default ``NAMES``); those that are one token with a leading space are
            used, and ``window`` of them must be.
    """

    name: str = field(default="binding", init=False)

    _DEFAULT_VALUES = LIKES
    _DEFAULT_KEYS = NAMES
    _KEY_NAME = "name"
    INTRO = "Read the facts, then answer the question with one word."
    LIST = "\n\nFacts:"

    def _pair(self, prompt: _Prompt, built: _Built, key: int, value: int) -> int:
        prompt.word(built.keys[key], built.key_ids[key])
        prompt.text(" likes")
        position = prompt.word(built.values[value], built.value_ids[value])
        prompt.text(".")
        return position

    def _query(self, prompt: _Prompt, built: _Built, key: int) -> None:
        prompt.text("\nQuestion: What does")
        prompt.word(built.keys[key], built.key_ids[key])
        prompt.text(" like?\nAnswer:")


register_task("llm-number", LLMNumberTask)
register_task("llm-letter", LLMLetterTask)
register_task("binding", BindingTask)
