"""Language-model substrate: load local HF models, read and steer their activations, chat, judge.

    lm = load("hf:/path/to/checkpoint")            # or "organism:chat-s", or a .gguf file
    acts = get_activations(lm, prompts, lm.sites("resid_pre"), "post_instruction")
    r = normalize(diff_in_means(acts_harmful, acts_harmless)[layer, -1])
    with ablate_direction(lm, r):
        replies = HFChatModel(lm).generate(prompts, max_new_tokens=32)

Images: ``load`` gives a :class:`VisionLanguageModel` for LLaVA-style folders and the vision
organisms; its prompts may hold image parts (``user_message(text, images=[...])``), and every
tool below takes them (see :mod:`trustlab.lm.multimodal`).

White-box access: ``lm.embed(ids)`` and ``lm.encode(prompts, soft=vectors)`` feed embeddings;
``target_logprob``/``token_gradients``/``project_to_tokens`` for attacks; per-head sites,
``unembed``, ``logit_lens``, ``direct_logit_attribution`` and ``patch_activations`` for circuits.

Site names are canonical for every family: ``embed``, ``blocks.{i}.resid_pre``,
``blocks.{i}.resid_post``, ``blocks.{i}.attn_out``, ``blocks.{i}.mlp_out``, and inside blocks
``blocks.{i}.head_z``, ``blocks.{i}.head_out``, ``blocks.{i}.mlp_hidden`` (see
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
from trustlab.lm.agent import (
    AgentCall,
    Episode,
    Tool,
    ToolResult,
    format_observation,
    format_tool_call,
    run_agent,
    tools_system_prompt,
)
from trustlab.lm.attribution import (
    LogitAttribution,
    NormSplit,
    direct_logit_attribution,
    logit_lens,
    split_norm,
    unembed,
)
from trustlab.lm.chat import (
    ChatBackendError,
    ChatModel,
    HFChatModel,
    OpenAIChatModel,
    ScriptedChatModel,
    chat_model,
)
from trustlab.lm.content import content_text, image_part, normalise_content, user_message
from trustlab.lm.decoding import (
    Steering,
    exact_match_settled,
    generate_rows,
    greedy_rows,
    refusal_settled,
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
from trustlab.lm.evaluation import Decoding, Evaluation, Transform, evaluate, judge_replies
from trustlab.lm.formatting import format_chat
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
    CallableJudge,
    ComplianceJudge,
    ExactMatchJudge,
    Judge,
    JudgeItem,
    ProbabilityRefusalJudge,
    Rate,
    RefusalJudge,
    RubricJudge,
    RubricScore,
    RubricSummary,
    Verdict,
    binomial_rate,
    is_refusal,
    parse_tool_call,
    refusal_score,
    refusal_token_ids,
)
from trustlab.lm.loading import load, register_resolver, registered_schemes
from trustlab.lm.model import (
    PLAIN_TEMPLATE_DOC,
    Batch,
    Conversation,
    LanguageModel,
    Prompt,
    Segment,
    SoftAt,
)
from trustlab.lm.multimodal import HFVisionTower, RenderedText, VisionLanguageModel
from trustlab.lm.objectives import (
    TokenGradients,
    TokenProjection,
    continuation_ids,
    project_to_tokens,
    target_logprob,
    token_gradients,
)
from trustlab.lm.patching import PatchResult, head_component, logit_diff_metric, patch_activations
from trustlab.lm.positions import Positions
from trustlab.lm.reply_cache import ReplyCache, model_fingerprint
from trustlab.lm.steering import (
    HarmGate,
    RefusalDirection,
    RowSteering,
    layer_candidates,
    layer_cosines,
    placebo_directions,
    row_additions,
)

__all__ = [
    "ADAPTERS",
    "PLAIN_TEMPLATE_DOC",
    "REFUSAL_PHRASES",
    "STRONGREJECT_TEMPLATE",
    "AblateDirection",
    "AddVector",
    "AgentCall",
    "Batch",
    "CallableJudge",
    "Capture",
    "ChatBackendError",
    "ChatModel",
    "ClampProjection",
    "ComplianceJudge",
    "Conversation",
    "Decoding",
    "DirectionChoice",
    "Episode",
    "Evaluation",
    "ExactMatchJudge",
    "FamilyAdapter",
    "HFChatModel",
    "HFVisionTower",
    "HarmGate",
    "Intervention",
    "Judge",
    "JudgeItem",
    "LanguageModel",
    "LogitAttribution",
    "NormSplit",
    "OpenAIChatModel",
    "PatchResult",
    "Positions",
    "ProbabilityRefusalJudge",
    "Prompt",
    "Rate",
    "RefusalDirection",
    "RefusalJudge",
    "RenderedText",
    "ReplaceActivation",
    "ReplyCache",
    "RowSteering",
    "RubricJudge",
    "RubricScore",
    "RubricSummary",
    "ScriptedChatModel",
    "Segment",
    "SoftAt",
    "Steering",
    "StepState",
    "TokenActivations",
    "TokenGradients",
    "TokenProjection",
    "Tool",
    "ToolResult",
    "Transform",
    "Verdict",
    "VisionLanguageModel",
    "ablate_direction",
    "ablation_metric",
    "add_vector",
    "binomial_rate",
    "capture",
    "chat_model",
    "clamp_projection",
    "content_text",
    "continuation_ids",
    "cosine_similarity_matrix",
    "diff_in_means",
    "direct_logit_attribution",
    "evaluate",
    "exact_match_settled",
    "fisher_rao",
    "format_chat",
    "format_observation",
    "format_tool_call",
    "generate_rows",
    "get_activations",
    "greedy_rows",
    "head_component",
    "hook",
    "image_part",
    "intervene",
    "is_refusal",
    "judge_replies",
    "kl_divergence",
    "layer_candidates",
    "layer_cosines",
    "load",
    "logit_diff_metric",
    "logit_lens",
    "model_fingerprint",
    "next_token_logprobs",
    "next_token_probs",
    "normalise_content",
    "normalize",
    "parse_tool_call",
    "patch_activations",
    "placebo_directions",
    "project_to_tokens",
    "refusal_score",
    "refusal_settled",
    "refusal_token_ids",
    "register_resolver",
    "registered_schemes",
    "replace_activation",
    "row_additions",
    "run_agent",
    "select_direction",
    "sequence_logprobs",
    "site_name",
    "split_norm",
    "target_logprob",
    "token_activations",
    "token_gradients",
    "tools_system_prompt",
    "total_variation",
    "unembed",
    "user_message",
]
