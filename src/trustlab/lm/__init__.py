"""Language-model substrate: load local HF models, read and steer their activations, chat, judge.

    lm = load("hf:/path/to/checkpoint")            # or "organism:chat-s", or a .gguf file
    acts = get_activations(lm, prompts, lm.sites("resid_pre"), "post_instruction")
    r = normalize(diff_in_means(acts_harmful, acts_harmless)[layer, -1])
    with ablate_direction(lm, r):
        replies = HFChatModel(lm).generate(prompts, max_new_tokens=32)

Site names are canonical for every family: ``embed``, ``blocks.{i}.resid_pre``,
``blocks.{i}.resid_post``, ``blocks.{i}.attn_out``, ``blocks.{i}.mlp_out`` (see
:mod:`trustlab.lm.adapters`). ``torch`` and ``transformers`` come with ``trustlab[llm]``.
"""

from trustlab.core.errors import MissingDependencyError

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise MissingDependencyError.for_package("torch", "llm", "trustlab.lm") from exc

from trustlab.lm.activations import (
    Capture,
    TokenActivations,
    capture,
    get_activations,
    token_activations,
)
from trustlab.lm.adapters import ADAPTERS, FamilyAdapter, site_name
from trustlab.lm.chat import (
    ChatBackendError,
    ChatModel,
    HFChatModel,
    OpenAIChatModel,
    ScriptedChatModel,
    chat_model,
)
from trustlab.lm.directions import (
    DirectionChoice,
    ablation_metric,
    cosine_similarity_matrix,
    diff_in_means,
    normalize,
    select_direction,
)
from trustlab.lm.distributions import (
    fisher_rao,
    kl_divergence,
    next_token_logprobs,
    next_token_probs,
    sequence_logprobs,
    total_variation,
)
from trustlab.lm.hooks import StepState, hook
from trustlab.lm.interventions import (
    AblateDirection,
    AddVector,
    ClampProjection,
    Intervention,
    ReplaceActivation,
    ablate_direction,
    add_vector,
    clamp_projection,
    intervene,
    replace_activation,
)
from trustlab.lm.judges import (
    REFUSAL_PHRASES,
    STRONGREJECT_TEMPLATE,
    ProbabilityRefusalJudge,
    Rate,
    RefusalJudge,
    RubricJudge,
    RubricScore,
    RubricSummary,
    binomial_rate,
    refusal_score,
    refusal_token_ids,
)
from trustlab.lm.loading import load, register_resolver, registered_schemes
from trustlab.lm.model import PLAIN_TEMPLATE_DOC, Batch, Conversation, LanguageModel, Prompt
from trustlab.lm.positions import Positions

__all__ = [
    "ADAPTERS",
    "PLAIN_TEMPLATE_DOC",
    "REFUSAL_PHRASES",
    "STRONGREJECT_TEMPLATE",
    "AblateDirection",
    "AddVector",
    "Batch",
    "Capture",
    "ChatBackendError",
    "ChatModel",
    "ClampProjection",
    "Conversation",
    "DirectionChoice",
    "FamilyAdapter",
    "HFChatModel",
    "Intervention",
    "LanguageModel",
    "OpenAIChatModel",
    "Positions",
    "ProbabilityRefusalJudge",
    "Prompt",
    "Rate",
    "RefusalJudge",
    "ReplaceActivation",
    "RubricJudge",
    "RubricScore",
    "RubricSummary",
    "ScriptedChatModel",
    "StepState",
    "TokenActivations",
    "ablate_direction",
    "ablation_metric",
    "add_vector",
    "binomial_rate",
    "capture",
    "chat_model",
    "clamp_projection",
    "cosine_similarity_matrix",
    "diff_in_means",
    "fisher_rao",
    "get_activations",
    "hook",
    "intervene",
    "kl_divergence",
    "load",
    "next_token_logprobs",
    "next_token_probs",
    "normalize",
    "refusal_score",
    "refusal_token_ids",
    "register_resolver",
    "registered_schemes",
    "replace_activation",
    "select_direction",
    "sequence_logprobs",
    "site_name",
    "token_activations",
    "total_variation",
]
