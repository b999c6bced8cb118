"""The numpy BERT runs all-MiniLM-L6-v2 as sentence-transformers does: the same vectors."""
import json
from pathlib import Path

import numpy as np
import pytest

from kbuild.retrieval.embedding import default_model_folder
from kbuild.retrieval.sentence_model import ModelFolderError, SentenceModel, loaded

DATA = Path(__file__).parent / "data"


def test_it_makes_the_vectors_sentence_transformers_makes():
    reference = json.loads((DATA / "minilm-reference.json").read_text())
    made = loaded(default_model_folder()).encode(reference["texts"])
    expected = np.array(reference["vectors"], dtype=np.float32)
    assert made.shape == expected.shape == (3, 384)
    cosines = (made * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() > 0.9999, cosines  # a text cut at 256 word pieces (the third) too


def test_the_order_of_its_inputs_is_the_order_of_its_vectors():
    model = loaded(default_model_folder())
    texts = ["a long text about refunds and the days they take " * 5, "short", "a middle one about logs"]
    together = model.encode(texts)
    alone = np.stack([model.encode([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)
    assert model.encode([]).shape == (0, 384)


def test_a_folder_that_holds_no_such_model_says_so(tmp_path):
    with pytest.raises(ModelFolderError, match="no config.json, model.safetensors, tokenizer.json"):
        SentenceModel(tmp_path)
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).write_text("")
    (tmp_path / "config.json").write_text('{"model_type": "t5"}')
    with pytest.raises(ModelFolderError, match="a 't5' model; only BERT models run here"):
        SentenceModel(tmp_path)
