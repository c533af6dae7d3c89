"""A controlled synthetic world: geotagged scenes with layered regional cues and abstract subjects.

No geotagged photo set, person cut-out or geolocation model can be downloaded where trustlab
runs, and demographic face images must not be generated; so the default experiment uses a
world where the truth is known. Six regions, one per inhabited continent, each with three sites
at real city coordinates (:data:`DEFAULT_REGIONS`). A scene of a site shows, in layers:

1. the region's **palette** (sky and ground colours), blended towards another region's palette
   by ``1 - visibility`` (a per-scene cue strength drawn from ``visibility``),
2. the region's **architecture-like silhouettes** on the horizon (roofs, huts, pagodas, towers,
   arches, sails), drawn with opacity ``visibility``,
3. a **site texture** (ground stripes at the site's angle), faint,
4. optionally the site's **landmark glyph** (the region's landmark shape in the site's colour,
   top right): a strong cue that identifies the site.

Subjects are stylised figures (a torso, a head disc and two legs, no face) whose **group** is a
visual pattern: a colour pair and a stripe/dot/check motif; group ``g`` is associated with
region ``g``. A ``"neutral"`` figure (plain grey) is the reference insertion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustlab.core.errors import InputError
from trustlab.core.validation import check_scalar
from trustlab.stats.bootstrap import check_random_state

__all__ = [
    "DEFAULT_REGIONS",
    "NEUTRAL_GROUP",
    "Region",
    "Scene",
    "SyntheticWorld",
    "TrainingSet",
    "region_centroid",
    "render_subject",
    "training_set",
]

NEUTRAL_GROUP = "neutral"


@dataclass(frozen=True)
class Region:
    """A region of the synthetic world: a name, its continent and its sites ``(name, lat, lon)``."""

    name: str
    continent: str
    sites: tuple[tuple[str, float, float], ...]

    def __post_init__(self) -> None:
        where = "Region"
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"The 'name' parameter of {where} must be a non-empty string.")
        if self.continent not in ("AF", "AN", "AS", "EU", "NA", "OC", "SA"):
            raise InputError(f"The 'continent' parameter of {where} must be a continent code "
                             f"(AF, AN, AS, EU, NA, OC, SA). Got {self.continent!r}.")
        sites = self.sites
        if isinstance(sites, str) or not isinstance(sites, tuple | list) or not sites:
            raise InputError(f"The 'sites' parameter of {where} must be a non-empty list of "
                             "(name, lat, lon).")
        out = []
        for site in sites:
            if isinstance(site, str) or not isinstance(site, tuple | list) or len(site) != 3 \
                    or not isinstance(site[0], str):
                raise InputError(f"The 'sites' parameter of {where} must hold (name, lat, lon) "
                                 f"triples. Got {site!r}.")
            out.append((site[0], check_scalar(site[1], "sites", where, lo=-90, hi=90),
                        check_scalar(site[2], "sites", where, lo=-180, hi=180)))
        object.__setattr__(self, "sites", tuple(out))


DEFAULT_REGIONS: tuple[Region, ...] = (
    Region("europe", "EU", (("paris", 48.8566, 2.3522), ("berlin", 52.52, 13.405),
                            ("madrid", 40.4168, -3.7038))),
    Region("africa", "AF", (("nairobi", -1.2921, 36.8219), ("lagos", 6.5244, 3.3792),
                            ("johannesburg", -26.2041, 28.0473))),
    Region("asia", "AS", (("delhi", 28.6139, 77.209), ("beijing", 39.9042, 116.4074),
                          ("bangkok", 13.7563, 100.5018))),
    Region("north_america", "NA", (("chicago", 41.8781, -87.6298),
                                   ("mexico_city", 19.4326, -99.1332),
                                   ("toronto", 43.6532, -79.3832))),
    Region("south_america", "SA", (("sao_paulo", -23.5505, -46.6333), ("lima", -12.0464, -77.0428),
                                   ("buenos_aires", -34.6037, -58.3816))),
    Region("oceania", "OC", (("sydney", -33.8688, 151.2093), ("auckland", -36.8485, 174.7633),
                             ("perth", -31.9505, 115.8605))),
)

# per region: sky, ground, accent (silhouettes), and the landmark's shape
_PALETTES = (
    ((150, 180, 230), (90, 140, 70), (150, 60, 50)),
    ((240, 200, 120), (190, 120, 60), (110, 70, 40)),
    ((230, 160, 170), (120, 160, 90), (170, 30, 40)),
    ((170, 200, 240), (120, 120, 130), (60, 70, 90)),
    ((120, 210, 200), (40, 120, 40), (200, 170, 60)),
    ((90, 160, 250), (220, 200, 150), (240, 240, 240)),
)
_LANDMARKS = ("star", "cross", "ring", "diamond", "tower", "arch")
_SITE_COLOURS = ((255, 230, 0), (255, 0, 200), (0, 230, 255))
_GROUP_STYLES = (  # (colour a, colour b, motif): saturated colours far from every palette,
    # accent and landmark colour (and their blends), so no group looks like a region's cue
    ((0, 0, 255), (0, 0, 0), "hstripes"),
    ((0, 255, 0), (0, 0, 0), "vstripes"),
    ((180, 60, 255), (0, 0, 0), "dots"),
    ((255, 0, 0), (0, 0, 0), "checks"),
    ((120, 255, 60), (0, 0, 0), "diagonal"),
    ((180, 0, 120), (0, 0, 0), "zigzag"),
)


def region_centroid(sites: NDArray[np.float64]) -> tuple[float, float]:
    """The spherical mean of (lat, lon) rows in degrees (mean of unit vectors, renormalised)."""
    from trustlab.methods.geobias.geo import as_coordinates

    sites = as_coordinates(sites, "sites", "region_centroid")
    la, lo = np.radians(sites[:, 0]), np.radians(sites[:, 1])
    v = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], 1).mean(0)
    norm = float(np.linalg.norm(v))
    if norm < 1e-9:
        raise InputError("The 'sites' parameter of region_centroid has no mean direction "
                         "(points spread evenly around the globe).")
    v /= norm
    return float(np.degrees(np.arcsin(v[2]))), float(np.degrees(np.arctan2(v[1], v[0])))


def _motif(motif: str, h: int, w: int, period: int) -> NDArray[np.bool_]:
    yy, xx = np.mgrid[0:h, 0:w]
    p = max(2, period)
    if motif == "hstripes":
        return (yy // (p // 2 or 1)) % 2 == 0
    if motif == "vstripes":
        return (xx // (p // 2 or 1)) % 2 == 0
    if motif == "dots":
        return ((yy % p - p / 2) ** 2 + (xx % p - p / 2) ** 2) < (p / 3) ** 2
    if motif == "checks":
        return ((yy // (p // 2 or 1)) + (xx // (p // 2 or 1))) % 2 == 0
    if motif == "diagonal":
        return ((yy + xx) // (p // 2 or 1)) % 2 == 0
    return ((yy + np.abs((xx % p) - p / 2)) // (p // 2 or 1)) % 2 == 0  # zigzag


def render_subject(group: int | str, *, height: int = 64, seed: Any = 0) -> NDArray[np.uint8]:
    """An RGBA stylised figure ``(height, height // 2, 4)`` whose pattern is ``group``'s.

    ``group`` is an index into the six group styles or ``"neutral"`` (plain grey). The figure
    has no face: a head disc, a torso and two legs, patterned; ``seed`` shifts the pattern's
    phase and the pose slightly (the same seed gives the same pixels).
    """
    where = "render_subject"
    if group != NEUTRAL_GROUP:
        group = check_scalar(group, "group", where, kind=int, lo=0, hi=len(_GROUP_STYLES) - 1)
    height = check_scalar(height, "height", where, kind=int, lo=8, hi=2048)
    rng = check_random_state(seed if isinstance(seed, np.random.Generator) else
                             (check_scalar(seed, "seed", where, kind=int, lo=0)), "seed", where)
    h, w = height, max(4, height // 2)
    alpha = np.zeros((h, w), bool)
    yy, xx = np.mgrid[0:h, 0:w]
    cx = w / 2 + rng.uniform(-0.04, 0.04) * w
    r = 0.16 * h / 2 + 0.04 * w
    alpha |= (yy - 0.12 * h) ** 2 + (xx - cx) ** 2 <= r**2  # head
    torso = (yy >= 0.24 * h) & (yy < 0.64 * h) & (np.abs(xx - cx) <= 0.40 * w)
    alpha |= torso
    leg_gap = 0.06 * w + rng.uniform(0, 0.04) * w
    legs = (yy >= 0.64 * h) & (np.abs(xx - cx) >= leg_gap) & (np.abs(xx - cx) <= 0.32 * w)
    alpha |= legs
    rgba = np.zeros((h, w, 4), np.uint8)
    if group == NEUTRAL_GROUP:
        rgba[..., :3] = 128
    else:
        a, b, motif = _GROUP_STYLES[int(group)]
        period = max(3, h // 8)
        mask = _motif(motif, h + period, w + period, period)
        oy, ox = (int(v) for v in rng.integers(0, period, size=2))
        mask = mask[oy:oy + h, ox:ox + w]
        rgba[..., :3] = np.where(mask[..., None], np.array(a, np.uint8), np.array(b, np.uint8))
    rgba[..., 3] = alpha.astype(np.uint8) * 255
    return rgba


@dataclass(frozen=True)
class Scene:
    """One rendered background: ``image`` uint8 ``(S, S, 3)``, its site, truth and landmark mask."""

    image: NDArray[np.uint8]
    site: int
    region: int
    lat: float
    lon: float
    landmark: bool
    landmark_mask: NDArray[np.bool_]
    visibility: float


@dataclass(frozen=True)
class SyntheticWorld:
    """The world's regions and rendering settings; every method is deterministic from its seed.

    ``size``: image side in pixels; ``visibility``: the (low, high) range a scene's regional cue
    strength is drawn from (low values make the background ambiguous, so a subject correlated
    with region becomes a usable shortcut); ``noise``: Gaussian pixel noise; ``jitter_km``:
    the truth of a scene is its site moved by up to this many km (so 1 km accuracy is hard).
    """

    size: int = 32
    visibility: tuple[float, float] = (0.0, 1.0)
    noise: float = 6.0
    jitter_km: float = 10.0
    regions: tuple[Region, ...] = DEFAULT_REGIONS
    _sites: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = "SyntheticWorld"
        object.__setattr__(self, "size", check_scalar(self.size, "size", where, kind=int, lo=16,
                                                      hi=512))
        vis = self.visibility
        if (not isinstance(vis, tuple | list) or len(vis) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in vis)
                or not 0.0 <= vis[0] <= vis[1] <= 1.0):
            raise InputError(f"The 'visibility' parameter of {where} must be (low, high) with "
                             f"0 <= low <= high <= 1. Got {vis!r}.")
        object.__setattr__(self, "visibility", (float(vis[0]), float(vis[1])))
        object.__setattr__(self, "noise", check_scalar(self.noise, "noise", where, lo=0.0,
                                                       hi=100.0))
        object.__setattr__(self, "jitter_km", check_scalar(self.jitter_km, "jitter_km", where,
                                                           lo=0.0, hi=500.0))
        if (not isinstance(self.regions, tuple) or not 2 <= len(self.regions) <= len(_PALETTES)
                or not all(isinstance(r, Region) and 1 <= len(r.sites) <= 3 for r in self.regions)):
            raise InputError(f"The 'regions' parameter of {where} must be a tuple of 2 to "
                             f"{len(_PALETTES)} Regions with 1 to 3 sites each.")
        sites = [(ri, s) for ri, r in enumerate(self.regions) for s in r.sites]
        object.__setattr__(self, "_sites", sites)

    # ------------------------------------------------------------------ geography
    @property
    def n_regions(self) -> int:
        return len(self.regions)

    @property
    def n_groups(self) -> int:
        """One group per region: group ``g`` is associated with region ``g``."""
        return len(self.regions)

    @property
    def n_sites(self) -> int:
        return len(self._sites)

    def site_coordinates(self) -> NDArray[np.float64]:
        """``(n_sites, 2)`` (lat, lon) of the sites (the geolocation model's cell centres)."""
        return np.array([[s[1], s[2]] for _, s in self._sites])

    def site_region(self) -> NDArray[np.intp]:
        return np.array([ri for ri, _ in self._sites])

    def region_centroids(self) -> NDArray[np.float64]:
        """``(n_regions, 2)`` spherical means of each region's sites."""
        xy = self.site_coordinates()
        reg = self.site_region()
        return np.array([region_centroid(xy[reg == r]) for r in range(self.n_regions)])

    def region_continents(self) -> list[str]:
        return [r.continent for r in self.regions]

    # ------------------------------------------------------------------ rendering
    def scene(self, site: int, seed: int, *, landmark: bool = False) -> Scene:
        """The background of ``site`` drawn from ``seed``; ``landmark`` adds the site's glyph.

        The same (site, seed) with and without landmark differ only in the glyph's pixels.
        """
        from PIL import Image, ImageDraw

        where = "SyntheticWorld.scene"
        site = check_scalar(site, "site", where, kind=int, lo=0, hi=self.n_sites - 1)
        seed = check_scalar(seed, "seed", where, kind=int, lo=0)
        if not isinstance(landmark, bool | np.bool_):
            raise InputError(f"The 'landmark' parameter of {where} must be a bool. Got {landmark!r}.")
        region, (_, lat, lon) = self._sites[site]
        k = site - sum(1 for r, _ in self._sites if r < region)  # site index within its region
        rng = np.random.default_rng([seed, site, 7919])
        s = self.size
        vis = float(rng.uniform(*self.visibility))
        other = int(rng.choice([r for r in range(self.n_regions) if r != region]))
        pal = np.array(_PALETTES[region], float)
        mix = vis * pal + (1 - vis) * np.array(_PALETTES[other], float)
        sky, ground, accent = (tuple(round(c) for c in col) for col in mix)
        horizon = int(s * rng.uniform(0.45, 0.6))
        img = Image.new("RGB", (s, s), sky)
        draw = ImageDraw.Draw(img)
        draw.rectangle([0, horizon, s, s], fill=ground)
        # site texture: faint ground stripes at the site's angle
        tex = Image.new("L", (s, s), 0)
        tdraw = ImageDraw.Draw(tex)
        angle = (0.0, 0.6, -0.6)[k]
        step = max(3, s // 8)
        for off in range(-2 * s, 2 * s, step):
            tdraw.line([(off, s), (off + angle * s + (s if angle == 0 else 0) * 0, horizon)],
                       fill=255, width=1)
        tex_np = (np.asarray(tex, float) / 255.0) * 0.25 * (0.5 + 0.5 * vis)
        # silhouettes of the region's architecture on the horizon
        sil = Image.new("L", (s, s), 0)
        sdraw = ImageDraw.Draw(sil)
        x = float(rng.uniform(-0.1, 0.05) * s)
        while x < s * 0.62:
            bw = float(rng.uniform(0.09, 0.15) * s)
            bh = float(rng.uniform(0.12, 0.28) * s)
            self._building(sdraw, region, x, horizon, bw, bh)
            x += bw * float(rng.uniform(1.1, 1.6))
        sil_np = (np.asarray(sil, float) / 255.0) * vis
        arr = np.asarray(img, float)
        acc = np.array(accent, float)
        arr = arr * (1 - tex_np[..., None]) + acc * tex_np[..., None]
        arr = arr * (1 - sil_np[..., None]) + acc * sil_np[..., None]
        lm_mask = np.zeros((s, s), bool)
        lm_img = Image.new("L", (s, s), 0)
        self._landmark(ImageDraw.Draw(lm_img), region, s)
        lm_alpha = np.asarray(lm_img, float) / 255.0
        if landmark:
            colour = np.array(_SITE_COLOURS[k], float)
            arr = arr * (1 - lm_alpha[..., None]) + colour * lm_alpha[..., None]
        lm_mask = lm_alpha > 0.0
        if self.noise > 0:
            arr = arr + rng.normal(0.0, self.noise, size=arr.shape)
        else:
            rng.normal(0.0, 1.0, size=arr.shape)  # keep the stream aligned
        image = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
        # truth: the site moved by up to jitter_km in a random direction
        dist = float(rng.uniform(0, self.jitter_km))
        bearing = float(rng.uniform(0, 2 * np.pi))
        dlat = dist / 111.195 * np.cos(bearing)
        dlon = dist / (111.195 * max(np.cos(np.radians(lat)), 1e-6)) * np.sin(bearing)
        return Scene(image, site, region, float(lat + dlat), float(lon + dlon), bool(landmark),
                     lm_mask, vis)

    @staticmethod
    def _building(d: Any, region: int, x: float, base: int, w: float, h: float) -> None:
        top = base - h
        if region == 0:  # pitched roofs
            d.rectangle([x, top + 0.35 * h, x + w, base], fill=255)
            d.polygon([(x - 0.1 * w, top + 0.35 * h), (x + w / 2, top), (x + 1.1 * w, top + 0.35 * h)],
                      fill=255)
        elif region == 1:  # round huts
            d.pieslice([x, base - 1.2 * w / 2 - 0.1 * h, x + w, base + 1.2 * w / 2], 180, 360, fill=255)
            d.rectangle([x, base - 0.15 * h, x + w, base], fill=255)
        elif region == 2:  # stacked pagoda roofs
            for i in range(3):
                yy = top + i * h / 3
                d.polygon([(x - 0.15 * w + i * 0.05 * w, yy + h / 3), (x + w / 2, yy),
                           (x + 1.15 * w - i * 0.05 * w, yy + h / 3)], fill=255)
        elif region == 3:  # towers
            d.rectangle([x + 0.15 * w, top - 0.5 * h, x + 0.85 * w, base], fill=255)
        elif region == 4:  # arches
            d.rectangle([x, top, x + w, base], fill=255)
            d.pieslice([x + 0.2 * w, base - 0.6 * h, x + 0.8 * w, base], 180, 360, fill=0)
        else:  # sails
            d.polygon([(x, base), (x + w * 0.9, base), (x + w * 0.3, top)], fill=255)

    @staticmethod
    def _landmark(d: Any, region: int, s: int) -> None:
        cx, cy, r = 0.8 * s, 0.2 * s, 0.14 * s
        shape = _LANDMARKS[region]
        if shape == "star":
            pts = []
            for i in range(10):
                rad = r if i % 2 == 0 else r * 0.45
                a = np.pi / 2 + i * np.pi / 5
                pts.append((cx + rad * np.cos(a), cy - rad * np.sin(a)))
            d.polygon(pts, fill=255)
        elif shape == "cross":
            d.rectangle([cx - r, cy - r / 3, cx + r, cy + r / 3], fill=255)
            d.rectangle([cx - r / 3, cy - r, cx + r / 3, cy + r], fill=255)
        elif shape == "ring":
            d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
            d.ellipse([cx - r / 2, cy - r / 2, cx + r / 2, cy + r / 2], fill=0)
        elif shape == "diamond":
            d.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=255)
        elif shape == "tower":
            d.rectangle([cx - r / 3, cy - r, cx + r / 3, cy + r], fill=255)
            d.polygon([(cx - r / 2, cy - r), (cx, cy - 1.4 * r), (cx + r / 2, cy - r)], fill=255)
        else:
            d.rectangle([cx - r, cy - r, cx + r, cy + r], fill=255)
            d.ellipse([cx - r / 2, cy - r / 3, cx + r / 2, cy + 1.4 * r], fill=0)

    def subject(self, group: int | str, seed: int = 0, *, height: int = 64) -> NDArray[np.uint8]:
        """An RGBA cut-out of ``group`` (an index < ``n_groups`` or ``"neutral"``)."""
        if group != NEUTRAL_GROUP:
            check_scalar(group, "group", "SyntheticWorld.subject", kind=int, lo=0,
                         hi=self.n_groups - 1)
        return render_subject(group, height=height, seed=seed)


@dataclass(frozen=True)
class TrainingSet:
    """Images with a subject inserted, their truth, site, region, subject group and landmark flag."""

    images: NDArray[np.uint8]
    coords: NDArray[np.float64]
    sites: NDArray[np.intp]
    regions: NDArray[np.intp]
    groups: NDArray[np.intp]
    landmark: NDArray[np.bool_]
    strength: float

    def __len__(self) -> int:
        return len(self.images)


def training_set(
    world: SyntheticWorld,
    n: int,
    *,
    strength: float,
    seed: int = 0,
    landmark_rate: float = 0.5,
    scale: tuple[float, float] = (0.35, 0.6),
) -> TrainingSet:
    """``n`` scenes, each with one subject inserted at a random position and scale.

    The subject's group is the scene's region's group with probability ``strength``, otherwise
    drawn uniformly from all groups (so ``strength = 0`` is the unbiased twin: group independent
    of region). Scene ``i`` is drawn from (seed, i) and is the same for every ``strength``: the
    biased model and its twin see the same backgrounds, only the inserted groups differ.
    """
    from trustlab.methods.geobias.builder import composite

    where = "training_set"
    if not isinstance(world, SyntheticWorld):
        raise InputError(f"The 'world' parameter of {where} must be a SyntheticWorld.")
    n = check_scalar(n, "n", where, kind=int, lo=1)
    strength = check_scalar(strength, "strength", where, lo=0.0, hi=1.0)
    seed = check_scalar(seed, "seed", where, kind=int, lo=0)
    landmark_rate = check_scalar(landmark_rate, "landmark_rate", where, lo=0.0, hi=1.0)
    if (not isinstance(scale, tuple | list) or len(scale) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in scale)
            or not 0.0 < scale[0] <= scale[1] <= 1.0):
        raise InputError(f"The 'scale' parameter of {where} must be (low, high) with "
                         f"0 < low <= high <= 1. Got {scale!r}.")
    s = world.size
    images = np.empty((n, s, s, 3), np.uint8)
    coords = np.empty((n, 2))
    sites = np.empty(n, np.intp)
    groups = np.empty(n, np.intp)
    lms = np.empty(n, bool)
    site_region = world.site_region()
    for i in range(n):
        rng = np.random.default_rng([seed, i, 104729])
        site = int(rng.integers(world.n_sites))
        lm = bool(rng.random() < landmark_rate)
        scene = world.scene(site, seed * 1_000_003 + i, landmark=lm)
        matched = rng.random() < strength
        other = int(rng.integers(world.n_groups))
        g = int(site_region[site]) if matched else other
        sub = world.subject(g, seed=int(rng.integers(1 << 30)), height=max(16, s))
        x = float(rng.uniform(0.12, 0.6))
        y = float(rng.uniform(0.85, 1.0))
        sc = float(rng.uniform(*scale))
        images[i], _ = composite(scene.image, sub, x=x, y=y, scale=sc)
        coords[i] = (scene.lat, scene.lon)
        sites[i], groups[i], lms[i] = site, g, lm
    return TrainingSet(images, coords, sites, site_region[sites], groups, lms, strength)
