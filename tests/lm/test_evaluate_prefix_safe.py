"""Early stopping under a prefix-safe transform judges decoded prefixes (regression test).

The loop's stop rules (exact match, refusal, placeholder) are written for decoded replies;
under a transform they used to see the raw encoded prefix, so a reply in ROT13 ("Fher: 8") was
stopped after its first token as "not the reference 'Sure: 8'", and every transformed exact
match read 0 (asymmetry's smol-chat utility, session 44). Here chat-xs answers plain prompts in
plain text and the transform decodes its replies with ROT13 against ROT13 references: early
stopping must give exactly the verdicts of full replies, and some of them must be right.
"""

from __future__ import annotations

import codecs
import functools

from trustlab import lm
from trustlab.datasets.prompt_sets import PromptSet, organism_prompt_set


def _rot13(text: str) -> str:
    return codecs.encode(text, "rot13")


def test_early_stop_judges_decoded_prefixes(chat_xs):
    tasks = organism_prompt_set("task", n=8, seed=3)
    ps = PromptSet("rot-refs", tasks.prompts, tuple(_rot13(r) for r in tasks.references),
                   tasks.meta)  # fmt: skip
    t = lm.Transform("rot-replies", str, functools.partial(codecs.encode, encoding="rot13"),
                     prefix_safe=True)  # fmt: skip
    values = {}
    for early in (True, False):
        r = lm.evaluate({"m": "organism:chat-xs"}, [ps], {ps.name: [lm.ExactMatchJudge()]},
                        transforms={"rot": t},
                        decoding=lm.Decoding(max_new_tokens=10, stop_early=early))  # fmt: skip
        values[early] = [it["value"] for it in sorted(r.items, key=lambda it: it["index"])]
    assert values[True] == values[False]
    assert any(values[False])  # chat-xs gets some tasks right: the test can tell
