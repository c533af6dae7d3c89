"""GeoBiaset and POPI: does an inserted person pull a geolocation model's predictions toward
the region associated with the person's group? (NeurIPS 2026 abstract 18.)

The library: a counterfactual benchmark builder (:class:`CounterfactualBuilder`), a controlled
synthetic world with known injected bias (:class:`SyntheticWorld`, :func:`training_set`),
geolocation models behind one interface (:class:`CellGeolocator`, :class:`LLMGeolocator`,
:class:`CallableGeolocator`), metrics (:func:`haversine_km`, :func:`accuracy_at`,
:func:`continent_of`, :func:`popi`, :func:`accuracy_drop`) and Grad-CAM attribution shares
(:func:`grad_cam`, :func:`attribution_share`). The experiment is ``trustlab run geobias``.
"""

from trustlab.methods.geobias.builder import (
    Background,
    Benchmark,
    CounterfactualBuilder,
    Subject,
    composite,
    load_backgrounds,
    load_subjects,
    rgba_sha256,
)
from trustlab.methods.geobias.geo import (
    CONTINENT_OF_COUNTRY,
    CONTINENTS,
    DEFAULT_THRESHOLDS_KM,
    EARTH_RADIUS_KM,
    TRANSCONTINENTAL,
    accuracy_at,
    as_coordinates,
    continent_of,
    country_of,
    haversine_km,
)
from trustlab.methods.geobias.gradcam import grad_cam
from trustlab.methods.geobias.metrics import (
    POPI,
    AccuracyDrop,
    accuracy_drop,
    as_predictions,
    attribution_share,
    popi,
    prediction_errors_km,
)
from trustlab.methods.geobias.models import (
    DEFAULT_LLM_PROMPT,
    CallableGeolocator,
    CellGeolocator,
    LLMGeolocator,
    as_image_batch,
    parse_coordinates,
)
from trustlab.methods.geobias.study import InsertionAnalysis, analyse_insertions, world_benchmark
from trustlab.methods.geobias.world import (
    DEFAULT_REGIONS,
    NEUTRAL_GROUP,
    Region,
    Scene,
    SyntheticWorld,
    TrainingSet,
    region_centroid,
    render_subject,
    training_set,
)

__all__ = [
    "CONTINENTS",
    "CONTINENT_OF_COUNTRY",
    "DEFAULT_LLM_PROMPT",
    "DEFAULT_REGIONS",
    "DEFAULT_THRESHOLDS_KM",
    "EARTH_RADIUS_KM",
    "NEUTRAL_GROUP",
    "POPI",
    "TRANSCONTINENTAL",
    "AccuracyDrop",
    "Background",
    "Benchmark",
    "CallableGeolocator",
    "CellGeolocator",
    "CounterfactualBuilder",
    "InsertionAnalysis",
    "LLMGeolocator",
    "Region",
    "Scene",
    "Subject",
    "SyntheticWorld",
    "TrainingSet",
    "accuracy_at",
    "accuracy_drop",
    "analyse_insertions",
    "as_coordinates",
    "as_image_batch",
    "as_predictions",
    "attribution_share",
    "composite",
    "continent_of",
    "country_of",
    "grad_cam",
    "haversine_km",
    "load_backgrounds",
    "load_subjects",
    "parse_coordinates",
    "popi",
    "prediction_errors_km",
    "region_centroid",
    "render_subject",
    "rgba_sha256",
    "training_set",
    "world_benchmark",
]
