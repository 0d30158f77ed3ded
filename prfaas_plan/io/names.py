"""Names that point at files: a scenario, model card or hardware profile given by path or by built-in name,
resolved next to the scenario that names it first and then in the directories that ship with the package;
and the one-instance pool that ``kv`` and ``validate`` build from names.

Problems name the caller's field: a YAML path, or the flag a command passes in (the library does not know
the command line's vocabulary).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from prfaas_plan.errors import InputError, Problem
from prfaas_plan.io.hardware import load_hardware
from prfaas_plan.io.models import load_model_card
from prfaas_plan.io.paths import builtin_root, display_path
from prfaas_plan.io.yamlsrc import Section, suggest
from prfaas_plan.spec.hardware import HardwareProfile, ProfilePoints, RooflineParams
from prfaas_plan.spec.scenario import POOL_METHODS, ModelCard, Pool

DEFAULT_SCENARIO = "paper-case-study"
#: Where a scenario's ``model:`` and ``hardware:`` names are looked for: (next to the scenario, built-in).
MODEL_DIRS = (("models",), ("workloads/models",))
HARDWARE_DIRS = (("../hardware_profiles", "hardware_profiles"), ("hardware_profiles",))


def rising(points: ProfilePoints) -> bool:
    """Whether the latencies strictly rise with length (a longer prefill is never faster): a roofline can be
    calibrated against them."""
    ordered = [v for _, v in sorted(zip(points.lengths_tokens, points.values, strict=True))]
    return all(b > a for a, b in pairwise(ordered))


def candidates(name: str, base: Path, dirs: tuple[tuple[str, ...], tuple[str, ...]]) -> Iterator[Path]:
    if name.endswith((".yaml", ".yml")):
        yield base / name
        return
    local, builtin = dirs
    for sub in local:
        yield base / sub / f"{name}.yaml"
    for sub in builtin:
        yield builtin_root() / sub / f"{name}.yaml"


def same_name(name: str, known: Iterable[str], *, organisation: bool = False) -> str | None:
    """The one known name that ``name`` spells in other case (``H100``), or, with ``organisation``, behind a
    Hugging Face organisation (``Qwen/Qwen3-235B-A22B``: one slash, not a path that starts with ``.``, ``/`` or
    ``~``); None where there is no such name or more than one."""
    wanted = name.lower()
    if organisation and name.count("/") == 1 and not name.startswith((".", "/", "~")):
        wanted = wanted.split("/")[1]
    found = [k for k in known if k.lower() == wanted]
    return found[0] if len(found) == 1 else None


def _suggest_name(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)``: the one known name that begins with ``name`` (``a100`` -> ``a100-80gb``) or
    that ``name`` begins with (a model's ``-instruct`` variant), else the closest spelling (``suggest``)."""
    known = list(known)
    wanted = name.rsplit("/", 1)[-1].lower()
    related = [k for k in known if k.lower().startswith(wanted) or wanted.startswith(k.lower() + "-")]
    if len(related) == 1:
        return f" (did you mean '{related[0]}'?)"
    return suggest(name, known)


def resolve_reference(
    sec: Section, key: str, base: Path, dirs: tuple[tuple[str, ...], tuple[str, ...]], what: str
) -> Path | None:
    """The file a scenario field names (``key`` in ``sec``): next to the scenario first, then among the
    built-ins; an unknown name is reported on the field, with a suggestion, and gives None. Exact names only, as
    the JSON Schema lists them (``named``, for flags, also takes other case)."""
    name = sec.string(key)
    if name is None:
        return None
    tried = list(dict.fromkeys(candidates(name, base, dirs)))
    for path in tried:
        if path.is_file():
            return path
    known = sorted({p.stem for d in {c.parent for c in tried} if d.is_dir() for p in d.glob("*.yaml")})
    sec.checker.report(
        (*sec.path, key),
        f"no {what} named '{name}'{_suggest_name(name, known)}; known: {', '.join(known) or 'none'}",
    )
    return None


def named(name: str, dirs: tuple[str, ...], what: str, field: str, *, organisation: bool = False) -> Path:
    """A file given by path or by built-in name (``DIR/NAME.yaml`` for each of ``dirs``; in other case, or behind
    an organisation with ``organisation``: ``same_name``); an unknown name is an InputError on ``field`` (the
    caller's name for the argument: a YAML field or a command-line flag)."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return path
    for sub in dirs:
        candidate = builtin_root() / sub / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    builtins = {p.stem: p for sub in reversed(dirs) for p in (builtin_root() / sub).glob("*.yaml")}  # first dir wins
    known = sorted(builtins)
    other = same_name(name, known, organisation=organisation)
    if other is not None:
        return builtins[other]
    _refuse_if_there(name, path, what, field, known)
    raise InputError(
        Problem(field=field, message=f"no {what} named '{name}'{_suggest_name(name, known)}; known: {', '.join(known)}")
    )


def _refuse_if_there(name: str, path: Path, what: str, field: str, known: list[str]) -> None:
    """A name that is no built-in but is there on disk as something other than a regular file (a directory, a
    device, a dangling link): an InputError saying what it is, rather than that it is missing."""
    if os.path.lexists(path):
        from prfaas_plan.io.guard import kind_of

        raise InputError(
            Problem(
                field=field,
                message=f"'{name}' is {kind_of(path)}, not a {what} file (nor a built-in's name: {', '.join(known)})",
            )
        )


def load_named_model(name: str, field: str = "model") -> ModelCard:
    """A model card by file path or built-in name (``workloads/models/NAME.yaml``)."""
    path = named(name, ("workloads/models",), "model card", field, organisation=True)
    return load_model_card(path, display_path(path))


def load_named_hardware(name: str, field: str = "hardware") -> HardwareProfile:
    """A hardware profile by file path or built-in name (``hardware_profiles/NAME.yaml``)."""
    return load_hardware(named(name, ("hardware_profiles",), "hardware profile", field))


def pool_for(
    model: str,
    hardware: str,
    gpus: int,
    method: str,
    roofline: dict[str, float] | None = None,
    fields: Mapping[str, str] | None = None,
) -> tuple[Pool, ModelCard]:
    """A one-instance pool of ``hardware`` x ``gpus`` for ``model`` costed by ``method`` (command-line use).

    ``calibrated`` fits the roofline to the hardware file's own measured prefill points for the model;
    ``roofline`` overrides fields of the default ``RooflineParams``. ``fields`` maps the arguments ``model``,
    ``hardware`` and ``method`` to the names problems should use (a command passes its flags).
    """
    names = {"model": "model", "hardware": "hardware", "method": "method", **(fields or {})}
    if method not in POOL_METHODS:
        raise InputError(
            Problem(field=names["method"], message=f"must be one of {', '.join(POOL_METHODS)}, got '{method}'")
        )
    card = load_named_model(model, names["model"])
    profile_file = load_named_hardware(hardware, names["hardware"])
    profile = profile_file.find(card.key, gpus)
    if method == "measured" and (profile is None or profile.kv_cache is None):
        raise InputError(
            Problem(
                file=profile_file.file,
                field="profiles",
                message=f"no measured prefill and kv_cache points for model '{card.key}' on {gpus} GPUs",
            )
        )
    if method != "measured" and card.architecture is None:
        raise InputError(Problem(field=names["model"], message=f"model card '{card.key}' has no architecture section"))
    if method != "measured" and card.architecture is not None:
        from prfaas_plan.physics.roofline import missing_peak  # roofline pools only (start-up time)

        why = missing_peak(card.architecture, profile_file.accelerator)
        if why is not None:
            raise InputError(Problem(file=profile_file.file, field="hardware.dense_tflops", message=why))
    calibration = None
    if method == "calibrated":
        calibration = next((p for p in profile_file.profiles if p.model == card.key), None)
        if calibration is None:
            raise InputError(
                Problem(
                    file=profile_file.file,
                    field="profiles",
                    message=f"no measured points for model '{card.key}' to calibrate the roofline against",
                )
            )
        if not rising(calibration.prefill):
            raise InputError(
                Problem(
                    file=profile_file.file,
                    field="profiles",
                    message=f"the '{card.key}' prefill latencies must rise with length_tokens to calibrate against",
                )
            )
    overrides: dict[str, Any] = dict(roofline or {})  # float fields only (the options that set them)
    # The hardware file's measured kernel shapes, as the scenario loader applies them; the options over both.
    base = (
        RooflineParams()
        if profile_file.kernel_shapes is None
        else RooflineParams().with_kernel_shapes(profile_file.kernel_shapes)
    )
    pool = Pool(
        hardware_key=profile_file.accelerator.key,
        accelerator=profile_file.accelerator,
        gpus_per_instance=gpus,
        instances=1,
        profile=profile,
        method=method,
        roofline=replace(base, source=_overridden(base), **overrides) if overrides else base,
        calibration=calibration,
        calibration_accelerator=profile_file.accelerator if calibration else None,
    )
    return pool, card


def _overridden(base: RooflineParams) -> str:
    """The source of command-line overrides over ``base``: the serving defaults' are not named (the label says
    so), a hardware file's kernel shapes are."""
    return "command-line overrides" if base == RooflineParams() else f"{base.source}; command-line overrides"


def resolve_scenario_path(name: str | None, field: str = "SCENARIO") -> Path:
    """A scenario argument: a path to a YAML file, or the name of a built-in scenario (default: the paper's). A
    directory or special file that happens to carry a built-in's name does not shadow it."""
    if name is None:
        return builtin_root() / "workloads" / f"{DEFAULT_SCENARIO}.yaml"
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        return path
    builtin = builtin_root() / "workloads" / f"{name}.yaml"
    if builtin.is_file():
        return builtin
    known = sorted(p.stem for p in (builtin_root() / "workloads").glob("*.yaml"))
    _refuse_if_there(name, path, "scenario", field, known)
    raise InputError(
        Problem(
            field=field,
            message=f"no scenario file or built-in scenario named '{name}'"
            f"{suggest(name, known)}; built-in: {', '.join(known)}",
        )
    )
