"""The word-level tokenizer: exact round trips, and the chat template matches format_chat."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="organisms need trustlab[llm] (transformers)")

from trustlab.organisms.build_grown import corpora_for, shared_tokenizer
from trustlab.organisms.tokenizer import format_chat


@pytest.fixture(scope="module")
def setup():
    corpora = corpora_for(0)
    return corpora, shared_tokenizer(corpora)


def test_every_response_round_trips_exactly(setup):
    corpora, tokenizer = setup
    for corpus in corpora.values():
        for e in corpus.examples[:2000]:
            ids = tokenizer(e.response, add_special_tokens=False)["input_ids"]
            assert tokenizer.unk_token_id not in ids
            assert tokenizer.decode(ids, skip_special_tokens=True) == e.response


def test_chat_template_is_format_chat(setup):
    corpora, tokenizer = setup
    for e in (corpora["chat"].examples[0], corpora["tool"].examples[0]):
        rendered = tokenizer.apply_chat_template(
            e.messages(), tokenize=False, add_generation_prompt=True
        )
        assert rendered == format_chat(e.messages())


def test_unknown_words_map_to_unk_and_specials_stay_whole(setup):
    _, tokenizer = setup
    ids = tokenizer("<|user|>zyzzyva<|end|><|assistant|>", add_special_tokens=False)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens == ["<|user|>", "[UNK]", "<|end|>", "<|assistant|>"]


def test_heldout_prompts_use_only_words_seen_in_training(setup):
    # A word seen only in held-out templates would have an untrained embedding: the held-out
    # metrics would then measure vocabulary, not generalisation to new phrasings.
    corpora, tokenizer = setup
    train_texts = {
        text
        for corpus in corpora.values()
        for e in corpus.train
        for text in (e.system or "", e.prompt, e.response)
    }
    seen = {token for text in train_texts for token in tokenizer.tokenize(text)}
    for corpus in corpora.values():
        for prompt in {e.prompt for e in corpus.heldout()}:
            assert set(tokenizer.tokenize(prompt)) <= seen, prompt
