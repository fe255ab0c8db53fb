"""Reading records and results files written by earlier sbprof versions; refusing those of a newer one.

Version 1 (sbprof 0.1.0) kept a cell's coordinates in an untyped ``config``
dict together with how it was measured, the device and thread count at the
top level, and the RTF denominator as ``config["batch_audio_s"]``. Version 2
types the coordinates (:class:`~sbprof.record.cell.Cell`) and keeps the rest
in ``settings``.

Results files:

- Version 1 (``sbprof-sweep-results``, sbprof 0.1.0): one sweep, its settings
  at the top and its cells as version-1 records.
- Version 2: the job names ``sweep`` and ``compare`` (today ``profile`` and
  ``compare-models``, the commands that write them), and each job's own names
  for the keys every job now shares (``warmup``, ``measured``); the device and
  thread count of a comparison, now coordinates of each record, sat in its rules;
  a sweep's failed profiled pass was ``extra.profile_error`` (``extra_error`` for every job now).
- Version 3: today's.
"""
from __future__ import annotations

from typing import Any, Dict

from sbprof.base.errors import ConfigError

V1_COORDINATES = ("model", "device", "threads", "audio_s", "batch_size", "input")


def migrate_measurement(d: Dict[str, Any]) -> Dict[str, Any]:
    """A record dict in today's layout (unchanged when it already is).

    Example
    -------
    >>> v1 = {"schema_version": 1, "label": "c", "device": "cpu", "num_threads": 1, "warmup": 1,
    ...       "wall_s": [0.1], "cpu_s": [0.1], "status": "ok", "config": {"model": "m", "device": "cpu",
    ...       "threads": 1, "audio_s": 2, "batch_size": 4, "input": "random:seed=0", "batch_audio_s": 8.0,
    ...       "seed": 0}}
    >>> v2 = migrate_measurement(v1)
    >>> v2["cell"]["audio_s"], v2["audio_seconds"], v2["settings"]
    (2, 8.0, {'seed': 0})
    """
    if not isinstance(d, dict):
        raise ConfigError(f"a measurement record must be a JSON object, got {type(d).__name__}")
    version = d.get("schema_version", 1 if "config" in d else 2)
    if version == 2:
        return d
    if isinstance(version, int) and not isinstance(version, bool) and version > 2:
        raise ConfigError(f"written by a newer sbprof (record schema version {version}); this sbprof reads "
                          "versions 1 and 2: upgrade sbprof to read it")
    if version != 1:
        raise ConfigError(f"record schema version {version!r} is not a version number")
    d = dict(d)
    config = dict(d.pop("config", None) or {})
    device = config.pop("device", d.pop("device", "cpu"))
    threads = config.pop("threads", d.pop("num_threads", 1))
    d.pop("device", None)
    d.pop("num_threads", None)
    d["cell"] = {"model": config.pop("model", ""), "device": device, "threads": threads,
                 "audio_s": config.pop("audio_s", None), "batch_size": config.pop("batch_size", None),
                 "input": config.pop("input", "")}
    d["audio_seconds"] = config.pop("batch_audio_s", None)
    d["settings"] = config
    d["schema_version"] = 2
    return d


FORMAT = "sbprof-results"
V1_FORMAT = "sbprof-sweep-results"
MACHINE_KEYS = ("hostname", "cpu", "cpu_count", "python", "torch", "torchaudio", "speechbrain", "cuda", "gpu")

JOB_NAMES = {"sweep": "profile", "compare": "compare-models"}
"""Version-2 job names -> the commands that write them today."""

RULE_NAMES: Dict[str, Dict[str, str]] = {
    "profile": {"warmup_batches": "warmup", "measured_batches": "measured"},
    "compare-models": {"samples": "measured"},
    "train": {"warmup_steps": "warmup", "measured_steps": "measured"},
}
"""Per job, version-2 rule keys -> today's shared names."""

DROPPED_RULES = {"compare-models": ("device", "threads")}
"""Version-2 rules that are coordinates of each record today."""


def migrate_results(data: Any, where: str, version: int) -> Dict[str, Any]:
    """``data`` (a loaded results file) in the layout of ``version``; a newer or foreign file is refused.

    Example
    -------
    >>> v2 = {"format": FORMAT, "version": 2, "job": "sweep", "rules": {"warmup_batches": 1}, "records": []}
    >>> new = migrate_results(v2, "r.json", 3)
    >>> new["job"], new["rules"], new["version"]
    ('profile', {'warmup': 1}, 3)
    >>> migrate_results({**v2, "version": 99}, "r.json", 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: r.json: written by a newer sbprof (results format version 99); this sbprof reads versions 1 to 3...
    """
    if not isinstance(data, dict) or data.get("format") not in (FORMAT, V1_FORMAT):
        raise ConfigError(f"{where}: not an sbprof results file")
    if data["format"] == V1_FORMAT:
        data = _from_version_1(data, where)
    found = data.get("version")
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise ConfigError(f"{where}: results format version {found!r} is not a version number")
    if found > version:
        raise ConfigError(f"{where}: written by a newer sbprof (results format version {found}); this sbprof reads "
                          f"versions 1 to {version}: upgrade sbprof to read it")
    if found < 2:  # version 1 was the sbprof-sweep-results format, migrated above
        raise ConfigError(f"{where}: results format version {found} is not supported")
    _refuse_mislabelled(data, found, where)
    if found < 3:
        data = _from_version_2(data)
    return data


def _refuse_mislabelled(data: Dict[str, Any], version: int, where: str) -> None:
    """Refuse a file whose ``version`` says one format while its content is written in the other: read under the
    wrong version, its job and rules would be taken for others (or a newer file migrated as an old one).

    Example
    -------
    >>> _refuse_mislabelled({"job": "sweep", "rules": {}}, 3, "r.json")
    Traceback (most recent call last):
    ...
    sbprof.base.errors.ConfigError: r.json: labelled results format version 3, but its job 'sweep' is written as in version 2 (today 'profile'): its 'version' was edited; set it back to 2
    """
    job = data.get("job") if isinstance(data.get("job"), str) else ""
    rules = data.get("rules") if isinstance(data.get("rules"), dict) else {}
    if version >= 3:
        renamed = RULE_NAMES.get(JOB_NAMES.get(job, job), {})
        old = [f"its job {job!r} is written as in version 2 (today {JOB_NAMES[job]!r})"] if job in JOB_NAMES else []
        old += [f"its rule {k!r} is written as in version 2 (today {renamed[k]!r})" for k in rules if k in renamed]
        if old:
            raise ConfigError(f"{where}: labelled results format version {version}, but {old[0]}: its 'version' was "
                              "edited; set it back to 2")
        return
    new = [f"its job {job!r}"] if job in JOB_NAMES.values() else []
    new += [f"its rule {k!r}" for k in rules if k in RULE_NAMES.get(job, {}).values()]
    if new:
        raise ConfigError(f"{where}: labelled results format version {version}, but {new[0]} is written as in "
                          "version 3: its 'version' was edited; set it back to 3")


def _from_version_2(data: Dict[str, Any]) -> Dict[str, Any]:
    data = dict(data)
    job = data.get("job", "sweep")
    job = JOB_NAMES.get(job, job)
    renames = RULE_NAMES.get(job, {})
    rules = data.get("rules")
    if isinstance(rules, dict):
        rules = {renames.get(k, k): v for k, v in rules.items() if k not in DROPPED_RULES.get(job, ())}
        if job == "transducer" and isinstance(rules.get("schedule"), dict):
            schedule = rules.pop("schedule")
            rules["warmup"] = schedule.get("wait", 0) + schedule.get("warmup", 0)
            rules["measured"] = schedule.get("active")
    records = data.get("records")
    if job == "profile" and isinstance(records, list):
        records = [_renamed_extra(r, "profile_error", "extra_error") for r in records]
    return {**data, "job": job, "rules": rules if rules is not None else {}, "records": records, "version": 3}


def _renamed_extra(record: Any, old: str, new: str) -> Any:
    """A record dict with ``extra[old]`` as ``extra[new]`` (others, and malformed ones, unchanged)."""
    extra = record.get("extra") if isinstance(record, dict) else None
    if not isinstance(extra, dict) or old not in extra:
        return record
    extra = {(new if k == old else k): v for k, v in extra.items()}
    return {**record, "extra": extra}


def _from_version_1(data: Dict[str, Any], where: str) -> Dict[str, Any]:
    """A version-1 sweep file in the version-2 layout: one model, the machine read from its records."""
    settings = data.get("settings")
    cells = data.get("cells")
    if not isinstance(settings, dict) or not isinstance(cells, list):
        raise ConfigError(f"{where}: a version-1 results file needs 'settings' (a mapping) and 'cells' (a list)")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("config"), dict):
            raise ConfigError(f"{where}: cell {i} has no coordinates ('config')")
        missing = [k for k in ("model", "device", "threads", "audio_s", "batch_size") if k not in cell["config"]]
        if missing:
            raise ConfigError(f"{where}: cell {i} lacks its coordinate(s) {', '.join(missing)}")
    env = next((c.get("env") for c in cells if isinstance(c.get("env"), dict)), {}) or {}
    return {
        "format": FORMAT, "version": 2, "job": "sweep",
        "rules": {k: settings[k] for k in ("input", "warmup_batches", "measured_batches") if k in settings},
        "models": {settings.get("model", ""): {k: settings[k] for k in ("model_kind", "interface", "method", "args")
                                              if k in settings}},
        "machine": {k: env[k] for k in MACHINE_KEYS if k in env},
        "records": cells,
    }
