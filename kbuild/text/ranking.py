"""BM25 (bm25s) over stemmed words (snowballstemmer): what search ranks by, its index and its words."""
from __future__ import annotations

import base64
import functools
import json
import math
import re
import sys
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

import snowballstemmer

WORD = re.compile(r"[a-z0-9]+")
STEM = snowballstemmer.stemmer("english")


# Forms the stemmer keeps apart from their word (issue 53): comparatives and superlatives ("older"
# is not "old": "compatible with old pythons" missed "eager on older versions"), and irregular
# past forms ("never sent over plain http" missed "only send the cookie through HTTPS").
_BASE_FORMS = {form: base for base, forms in (
    ("old", "older oldest"), ("new", "newer newest"), ("long", "longer longest"), ("short", "shorter shortest"),
    ("high", "higher highest"), ("low", "lower lowest"), ("large", "larger largest"), ("small", "smaller smallest"),
    ("fast", "faster fastest"), ("slow", "slower slowest"), ("strong", "stronger strongest"),
    ("weak", "weaker weakest"), ("safe", "safer safest"), ("big", "bigger biggest"), ("easy", "easier easiest"),
    ("early", "earlier earliest"),
    # and irregular past forms of verbs a question asks with, none of them another word too
    # ("found", "left", "written" are: "written" then matched every "write" of PEP 8)
    ("send", "sent"), ("keep", "kept"), ("tell", "told"), ("build", "built"), ("choose", "chose chosen"),
    ("steal", "stole stolen"), ("hide", "hid hidden"), ("show", "shown"), ("lose", "lost"), ("break", "broke broken"),
    ("take", "took taken"), ("catch", "caught"), ("get", "got gotten"), ("begin", "began begun"),
    ("run", "ran"), ("write", "wrote"), ("give", "gave"), ("forget", "forgot forgotten")) for form in forms.split()}


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return STEM.stemWord(_BASE_FORMS.get(word, word))  # pure Python and slow; a store's vocabulary is small, so memoise


def tokens(text: str) -> list[str]:
    """Words as BM25 compares them: stemmed, so "refund requests" finds "refunds requested"."""
    return [_stem(w) for w in WORD.findall(text.lower())]


def rank(documents: list[str], query: str) -> list[tuple[int, float]]:
    """(index, score) of the documents that share a word with the query, best first (ties in
    document order, so a ranking is reproducible): the index lines of a store with no search index."""
    import numpy as np

    counted = [Counter(tokens(d)) for d in documents]
    vocabulary = {term: n for n, term in enumerate(sorted({t for c in counted for t in c}))}
    wanted = [vocabulary[t] for t in tokens(query) if t in vocabulary]
    if not wanted:
        return []
    terms = np.fromiter((vocabulary[t] for c in counted for t in c), dtype=np.int32)
    counts = np.fromiter((n for c in counted for n in c.values()), dtype=np.float32)
    lengths = np.fromiter(map(len, counted), dtype=np.int64, count=len(counted))
    scores = _indexed(terms, counts, lengths, vocabulary).get_scores(wanted)  # bm25s's idf is never 0 or less
    return [(int(i), float(scores[i])) for i in np.lexsort((np.arange(len(scores)), -scores)) if scores[i] > 0]


# --------------------------------------------------------------------------- the persisted index
#
# bm25s, not a hand-written inverted index, measured by benchmarks/retrieval.py (100,000 sections
# of 120 words, 8-word queries, this machine): bm25s loads memory-mapped in 14 ms and answers in
# 1.6 ms; the hand-written index (postings as strings in JSON, parsed per query word) took
# 177 ms to load and 194 ms a query. bm25s needs only numpy.
# Tantivy was not measured: a native wheel and a tokenizer of its own, where this needs ours.

K1, B = 1.2, 0.75
# Words a question is made of that say nothing of its subject: its frame ("how do I"); a yes-or-no
# judgement ("is == None ok?"), which a source gives as "should" or "avoid", never in the reader's
# word; the particle of a phrasal verb, which `compounds` joins to it ("logs out" is "logout", and
# its "out" alone matched every "time out"); the tails of "user's", "don't", "I'd", "we'll",
# "they're", "I've", "I'm" (WORD splits at the apostrophe).
STOP = frozenset("""a an and are as at be been but by can could did do does doing for from had has have
how i if in into is it its may me might my of on or our shall should so than that the their them then
there these they this those to us was we were what when where which while who whom why will with
would you your yours
ok okay fine acceptable alright
out up off down over away
s t d ll re ve m""".split())

# Common abbreviations and the words they stand for, so a question in the short form finds a
# text that spells it out (and the other way round). A document's own "Foo Bar (FB)"
# definitions are added to these when its sections are indexed (`defined_abbreviations`).
ABBREVIATIONS = {
    "stdlib": "standard library", "env": "environment", "var": "variable", "vars": "variables",
    "cli": "command line", "kwarg": "keyword argument", "kwargs": "keyword arguments",
    "arg": "argument", "args": "arguments", "param": "parameter", "params": "parameters",
    "func": "function", "fn": "function", "def": "function", "repl": "interactive interpreter", "config": "configuration",
    "docs": "documentation", "doc": "documentation", "dir": "directory", "repo": "repository",
    "db": "database", "auth": "authentication", "api": "interface", "impl": "implementation",
    "perf": "performance", "deps": "dependencies", "dep": "dependency", "init": "initialisation",
    "charset": "encoding", "len": "length", "max": "maximum", "min": "minimum", "num": "number",
    "str": "string", "int": "integer", "dict": "dictionary", "obj": "object", "msg": "message",
    "err": "error", "exc": "exception", "py": "python", "ts": "timestamp", "tz": "timezone",
    # numeronyms: the first letter, how many letters follow, the last ("k8s": Kubernetes)
    "k8s": "kubernetes", "i18n": "internationalization", "l10n": "localization", "a11y": "accessibility",
    "o11y": "observability", "e2e": "end to end",
}
# A reader's plain words and the formal ones a standard writes for them, after the plain-language
# guidance that asks writers for the first ("make sure", not "ensure"; "tell", not "notify"): read
# backwards, a question's plain word also asks, at half weight, for the standard's. Verbs and
# phrasal verbs mostly: a standard says "instruct the browser to clear", a reader "tell the
# browser to wipe" (issue 53).
PLAIN_WORDS = {
    "make sure": "ensure", "find out": "determine", "set up": "configure", "turn off": "disable",
    "turn on": "enable", "switch off": "disable", "switch on": "enable", "get rid of": "remove",
    "show up": "appear", "log in": "authenticate", "sign in": "authenticate", "sign up": "register",
    "tell": "notify inform instruct", "wipe": "clear erase", "keep": "store retain", "send": "transmit",
    "get": "obtain retrieve", "stop": "prevent block", "check": "verify validate", "change": "modify",
    "need": "require", "start": "initiate", "ask": "request", "let": "allow permit", "allow": "permit",
    "enough": "sufficient", "before": "prior", "buy": "purchase", "help": "assist", "show": "display",
    "fresh": "new", "leak": "disclose", "try": "attempt", "run": "execute", "give": "provide grant",
    "pick": "select", "choose": "select", "main": "primary", "whole": "entire", "plain": "unencrypted",
}
PLAIN_WEIGHT = 0.5
DEFINED = re.compile(r"\b((?:[A-Z][\w-]*[ -]){1,5}[A-Z][\w-]*|(?:[a-z][\w-]* ){1,5}[a-z][\w-]*) \(([A-Z][A-Za-z]{1,7})\)")


def defined_abbreviations(text: str) -> dict[str, str]:
    """The abbreviations a text defines, "Service Level Agreement (SLA)": each with the words
    it stands for, when the initials of the last words spell it."""
    found = {}
    for words, short in DEFINED.findall(text):
        parts = re.findall(r"[A-Za-z0-9]+", words)
        letters = short.lower()
        for n in range(len(parts), 0, -1):
            tail = parts[-n:]
            if "".join(p[0].lower() for p in tail) == letters:
                found[letters] = " ".join(tail).lower()
                break
    return found


NUMERONYM = re.compile(r"[a-z]\d+[a-z]")


def spelled_out(query: str) -> str:
    """The words of the numeronyms a question uses ("k8s": "kubernetes"), for what reads it as a
    whole: a sentence model reads "k8s" as three word pieces, and put beside the question
    "kubernetes" brought the section that answers it from 13th nearest to 4th. The table's other
    entries stay out: they are words to match ("api": "interface"), not spellings, and beside a
    question that said "API" one cost a question its answer at 5,000 tokens."""
    return " ".join(dict.fromkeys(ABBREVIATIONS[w] for w in WORD.findall(query.lower())
                                  if w in ABBREVIATIONS and NUMERONYM.fullmatch(w)))


def query_terms(query: str, abbreviations: dict[str, str] | None = None) -> dict[str, float]:
    """The stemmed words of a question with their weights: words that say nothing of its subject
    dropped (unless nothing else is left), each abbreviation expanded to what it stands for
    (the short form then counts half), and a spelled-out term also asks for its abbreviation."""
    words = WORD.findall(query.lower())
    table = {**ABBREVIATIONS, **(abbreviations or {})}
    content = [w for w in words if w not in STOP] or words
    weights: dict[str, float] = {}
    for w in content:
        if w in table:  # a text more often spells the term out than it abbreviates it
            weights[_stem(w)] = weights.get(_stem(w), 0.0) + 0.5
            for t in tokens(table[w]):
                weights[t] = max(weights.get(t, 0.0), 1.0)
        else:
            weights[_stem(w)] = weights.get(_stem(w), 0.0) + 1.0
    joined = " ".join(content)
    for short, long in table.items():
        if len(long.split()) > 1 and long in joined:
            weights.setdefault(_stem(short), 0.6)
    stems = tuple(_stem(w) for w in words)
    for plain, formal in _PLAIN_STEMS:
        if any(stems[i:i + len(plain)] == plain for i in range(len(stems) - len(plain) + 1)):
            if len(plain) > 1:  # an idiom: its words alone mean something else ("make", "sure")
                for word in plain:
                    weights.pop(word, None)
            for term in formal:
                weights[term] = max(weights.get(term, 0.0), PLAIN_WEIGHT)
    return weights


_PLAIN_STEMS = [(tuple(tokens(plain)), tokens(formal)) for plain, formal in PLAIN_WORDS.items()]


def compounds(query: str, weights: dict[str, float], vocabulary: Mapping[str, int]) -> dict[str, float]:
    """`weights` with the words an index spells otherwise: a word no section holds that is two
    words they do ("classmethod" for "class method") asks for those two, half each, and two
    words of the query that sections write as one ("time stamp", "log in", "logs out") ask for it too."""
    words = WORD.findall(query.lower())
    found = dict(weights)
    for word in words:
        if len(word) < 2 * SPLIT_PART or _stem(word) in vocabulary:
            continue
        for cut in range(SPLIT_PART, len(word) - SPLIT_PART + 1):
            head, tail = _stem(word[:cut]), _stem(word[cut:])
            if head in vocabulary and tail in vocabulary and not {word[:cut], word[cut:]} & STOP:
                for part in (head, tail):
                    found[part] = found.get(part, 0.0) + 0.5
                break
    for first, second in zip(words, words[1:]):
        if first in STOP:
            continue
        # "logs out", "logged in": the first word inflected, the one word the sections write is not
        joined = next((j for j in (_stem(first + second), _stem(_stem(first) + second)) if j in vocabulary), None)
        if joined is not None and joined not in found:
            found[joined] = 0.5
    return found


SPLIT_PART = 3  # letters: the shortest word a compound is split into ("log", "tab"); shorter splits are chance


INDEX_FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "params.index.json",
               "vocab.index.json")  # what bm25s saves


class Segment(TypedDict):
    """Documents' term counts as one segment of an index (`segment`): a query value."""

    terms: list[str]  # in sorted order
    postings: str  # document after document, each term a document holds (its place in terms), packed
    counts: str  # how often it holds it, packed
    lengths: str  # the number of terms of each document, packed


# Numbers packed as base64 of little-endian uint32: a segment is a query value, and a project's
# index reads every source's segment on each edit; JSON reads a packed list back as one string,
# not number by number, and NumPy takes it as it is.
_UINT32 = next(code for code in "IL" if array(code).itemsize == 4)


def _packed(numbers: Iterable[int]) -> str:
    packed = array(_UINT32, numbers)
    if sys.byteorder == "big":  # one spelling on every machine: the value is hashed into the lock
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def unpacked(text: str) -> list[int]:
    """The numbers `_packed` packed."""
    packed = array(_UINT32, base64.b64decode(text))
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tolist()


def segment(documents: list[dict[str, int]]) -> Segment:
    """Documents' term counts as one segment of an index: its terms in sorted order and,
    document after document, each term a document holds and how often."""
    terms = sorted({t for d in documents for t in d})
    place = {t: n for n, t in enumerate(terms)}
    return {"terms": terms, "postings": _packed(place[t] for d in documents for t in d),
            "counts": _packed(c for d in documents for c in d.values()), "lengths": _packed(len(d) for d in documents)}


def build_index(segments: list[Segment]) -> dict[str, bytes]:
    """The files of a bm25s index over the documents of these segments, in order (name ->
    bytes): deterministic, the vocabulary numbered in sorted order."""
    import numpy as np

    named = [t for s in segments for t in s["terms"]]  # every segment's terms, one after another
    vocabulary = {term: n for n, term in enumerate(sorted(set(named)))}

    def joined(key: Literal["postings", "counts", "lengths"]) -> tuple[Any, list[int]]:
        # decoded and joined as bytes, then read by NumPy once: a project has a segment per group
        # of facts, and an array per segment was most of the merge
        packed = [base64.b64decode(s[key]) for s in segments]
        return np.frombuffer(b"".join(packed), dtype="<u4"), [len(p) // 4 for p in packed]

    # each posting's place in its segment's terms, as a place in all segments' terms, then in the vocabulary
    postings, sizes = joined("postings")
    firsts = np.cumsum([0, *(len(s["terms"]) for s in segments)], dtype=np.int64)[:-1]
    terms = np.array([vocabulary[t] for t in named], dtype=np.int32)[postings + np.repeat(firsts, sizes)]
    counts, lengths = joined("counts")[0].astype(np.float32), joined("lengths")[0].astype(np.int64)
    return saved_files(_indexed(terms, counts, lengths, vocabulary))


def _indexed(terms: Any, counts: Any, lengths: Any, vocabulary: dict[str, int]) -> Any:
    """A bm25s retriever over documents given as term counts: each document's term ids and their
    counts, one after another, and how many terms each document has."""
    retriever = _counted_bm25()(k1=K1, b=B)
    retriever.index(_Counted(terms, counts, lengths, vocabulary), show_progress=False, leave_progress=False)
    return retriever


def saved_files(retriever: Any) -> dict[str, bytes]:
    """The files a bm25s retriever saves (name -> bytes). bm25s spells the vocabulary with orjson
    where some other package installed it, and with json elsewhere: here it is spelled as json
    does on every machine, so that a teammate's rebuild of an unchanged index leaves it as it was."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        retriever.save(folder)
        files = {name: (Path(folder) / name).read_bytes() for name in INDEX_FILES}
    files["vocab.index.json"] = json.dumps(json.loads(files["vocab.index.json"]), ensure_ascii=False).encode()
    return files


class _Counted:
    """A corpus as term counts (what bm25s's `index` takes as an object with `ids` and `vocab`):
    each document's term ids and their counts, one after another, and how many terms each has."""

    def __init__(self, terms: Any, counts: Any, lengths: Any, vocabulary: dict[str, int]) -> None:
        self.ids, self.vocab = (terms, counts, lengths), vocabulary


def by_term(scores: Any, documents: Any, terms: Any, vocabulary: int) -> tuple[Any, Any, Any]:
    """The postings of fewer than 65,536 terms in bm25s's CSC order (what its `_np_csc` gives):
    term after term, each term's documents in order; (their scores, their documents, where each
    term starts). bm25s sorts keys of (term << 32 | document); the documents come in order and
    hold a term once each, so that is the stable sort of the terms alone, which NumPy does by
    radix sort for 16-bit keys (python benchmarks/index_build.py times the whole index)."""
    import numpy as np

    order = np.argsort(terms.astype(np.uint16), kind="stable")
    starts = np.zeros(vocabulary + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=vocabulary), out=starts[1:])
    return scores[order], documents[order], starts


@functools.cache
def _counted_bm25() -> type:
    """bm25s's BM25 with its documented extension point, `build_index_from_ids`, over term
    counts in NumPy: the same scores as bm25s's own loop over each document's token list
    (tests/test_text.py holds the files equal byte for byte). For the 4,000 sections of a
    document of 2,000 chunks, with the files written: 8 ms, against 72 ms for bm25s's own
    index over the token lists spelled out from the counts (benchmarks/index_build.py)."""
    import bm25s
    import numpy as np

    class CountedBM25(bm25s.BM25):  # type: ignore[misc]
        def build_index_from_ids(self, unique_token_ids: list[int], corpus_token_ids: Any,
                                 show_progress: bool = True, leave_progress: bool = False) -> dict[str, Any]:
            assert self.method not in self.methods_requiring_nonoccurrence  # BM25L and BM25+ are not written here
            self.nonoccurrence_array = None
            terms, counts, lengths = corpus_token_ids
            documents, vocabulary = len(lengths), len(unique_token_ids)
            document = np.repeat(np.arange(documents, dtype=self.int_dtype), lengths)
            length = np.bincount(document, weights=counts, minlength=documents).astype(np.int64)
            frequency = np.bincount(terms, minlength=vocabulary)
            # as bm25s computes them: the idf in float64 kept as float32, each document's length
            # over the mean, the term-frequency part in float64, the score kept as float32
            seen, where = np.unique(frequency, return_inverse=True)  # a few hundred values, by math.log as bm25s
            idf = np.array([math.log(1 + (documents - f + 0.5) / (f + 0.5)) if f else 0.0 for f in seen.tolist()],
                           dtype=self.dtype)[where]
            average = length.mean()
            tfc = counts / (self.k1 * ((1 - self.b) + self.b * length[document] / average) + counts)
            scores = (idf[terms] * tfc).astype(self.dtype)
            if vocabulary < 1 << 16:
                data, indices, indptr = by_term(scores, document, terms, vocabulary)
            else:
                data, indices, indptr = self._np_csc(data=scores, rows=document, cols=terms, shape=(documents, vocabulary))
            return {"data": data.astype(self.dtype), "indices": indices, "indptr": indptr, "num_docs": documents}

    return CountedBM25


class SectionIndex:
    """A bm25s index loaded memory-mapped, scored one query word at a time so that each word
    has its weight (an expanded abbreviation counts less than a word typed) and its share."""

    def __init__(self, folder: Path) -> None:
        import bm25s

        self.retriever = bm25s.BM25.load(str(folder), mmap=True)
        self.vocabulary: dict[str, int] = self.retriever.vocab_dict

    def _per_word(self, weights: dict[str, float]) -> list[tuple[str, float, Any]]:
        found = []
        for term, weight in sorted(weights.items()):
            n = self.vocabulary.get(term)
            if n is not None and term:
                found.append((term, weight, self.retriever.get_scores_from_ids([n])))
        return found

    def ranked(self, weights: dict[str, float], limit: int = 500) -> list[tuple[int, float, list[tuple[str, float]]]]:
        """(document, score, each matched word with its share) for the `limit` best documents
        that hold a word of the query, best first; ties in document order, so a ranking is
        reproducible."""
        import numpy as np

        per_word = self._per_word(weights)
        if not per_word:
            return []
        total = sum(weight * scores.astype(np.float64) for _, weight, scores in per_word)
        held = np.flatnonzero(total > 0)
        if len(held) > limit:  # the best `limit` and every document that ties with the last of them
            floor = np.partition(total[held], len(held) - limit)[len(held) - limit]
            held = held[total[held] >= floor]
        order = held[np.lexsort((held, -total[held]))]
        return [(int(d), float(total[d]), sorted(((t, float(w * s[d])) for t, w, s in per_word if s[d] > 0),
                                                 key=lambda x: (-x[1], x[0]))) for d in order]
