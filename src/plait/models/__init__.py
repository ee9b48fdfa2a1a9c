"""Model adapters: one small protocol (``Model``) and its implementations.

``scripted`` answers from a file (tests, demos, benchmarks); ``openai`` and
``anthropic`` wrap the official SDKs, which are optional extras imported only
when a spec names them; ``registry`` maps a spec's prefix to its provider;
``prices`` turns token counts into micro-dollars.
"""

from plait.models.base import (
    CAUSES,
    Delta,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    OnDelta,
    StreamingModel,
    ToolSpec,
)
from plait.models.prices import (
    BUILTIN_PRICES,
    Price,
    price_of,
    reserve_usd_micros,
    turn_cost_usd_micros,
)
from plait.models.registry import PROVIDERS, Provider, check_credentials, model_from_spec
from plait.models.scripted import ScriptedModel

__all__ = [
    "BUILTIN_PRICES",
    "CAUSES",
    "PROVIDERS",
    "Delta",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "OnDelta",
    "Price",
    "Provider",
    "ScriptedModel",
    "StreamingModel",
    "ToolSpec",
    "check_credentials",
    "model_from_spec",
    "price_of",
    "reserve_usd_micros",
    "turn_cost_usd_micros",
]
