"""Writing model cards: a card as YAML text in the schema ``io/models.py`` reads (with comments), an atomic file
write, and the sizes a card implies (a JSON-ready summary for display)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from prfaas_plan.io.hf_import import ImportedCard
from prfaas_plan.io.models import ATTENTION_FIELDS, FFN_FIELDS
from prfaas_plan.physics.memory import kv_bytes_per_token, linear_state_bytes, parameter_count, window_bytes
from prfaas_plan.report.files import Owner, write_file
from prfaas_plan.spec.model import Attention, Ffn, LayerGroup
from prfaas_plan.spec.scenario import ModelCard

_WIDTH = 116  # comment lines wrap here, inside the 120-column convention


def _flow(kind: str, obj: Attention | Ffn, fields: tuple[tuple[str, ...], tuple[str, ...]]) -> str:
    """``{kind: ..., field: value, ...}``: the kind's required fields, then its optional ones when they matter."""
    required, optional = fields
    parts = [f"kind: {kind}"] + [f"{name}: {getattr(obj, name)}" for name in required]
    for name in optional:
        value = getattr(obj, name)
        if name == "v_head_dim" and isinstance(obj, Attention) and value == obj.head_dim:
            continue  # the loader's default
        if value is True:
            parts.append(f"{name}: true")
        elif value:
            parts.append(f"{name}: {value}")
    return "{" + ", ".join(parts) + "}"


def _group_lines(group: LayerGroup, note: str) -> list[str]:
    """One ``- count/attention/ffn`` item of a layer list."""
    att, ffn = group.attention, group.ffn
    return [
        f"    - count: {group.count}{note}",
        f"      attention: {_flow(att.kind, att, ATTENTION_FIELDS[att.kind])}",
        f"      ffn: {_flow(ffn.kind, ffn, FFN_FIELDS[ffn.kind])}",
    ]


def _comment(text: str) -> list[str]:
    """``text`` as ``#`` lines wrapped at the column limit; a ``- `` item's continuation lines hang under it."""
    hang = "  " if text.startswith("- ") else ""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > _WIDTH - 2:
            lines.append(line)
            line = f"{hang}{word}"
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return [f"# {entry}" for entry in lines]


def render_card(
    card: ModelCard,
    *,
    header: Sequence[str] = (),
    group_notes: Sequence[str] = (),
    notes: Sequence[str] = (),
    unmapped: Sequence[tuple[str, str, str]] = (),
) -> str:
    """A model card as YAML text that ``load_model_card`` reads back to the same card.

    ``header`` lines open the file as comments; ``group_notes[i]`` comments layer group i; ``notes`` (judgement
    calls) and ``unmapped`` (field, value, reason) are listed as comments after the header.
    """
    arch = card.architecture
    out: list[str] = []
    for line in header:
        out += _comment(line)
    if notes:
        out.append("# Judgement calls:")
        for note in notes:
            out += _comment(f"- {note}")
    if unmapped:
        out.append("# Not mapped (the card schema cannot express these fields):")
        for field, value, reason in unmapped:
            out += _comment(f"- {field} = {value}: {reason}")
    out.append("model:")
    out.append(f"  name: {json.dumps(card.name, ensure_ascii=False)}")
    if card.parameters_b is not None:
        out.append(f"  parameters_b: {card.parameters_b:g}")
    if card.active_parameters_b is not None:
        out.append(f"  active_parameters_b: {card.active_parameters_b:g}")
    out.append(f"  source: {json.dumps(card.source, ensure_ascii=False)}")
    if card.inferred:
        out.append("  inferred: true")
    if arch is not None:
        d = arch.dtypes
        out += [
            "",
            "architecture:",
            f"  hidden_size: {arch.hidden_size}",
            f"  vocab_size: {arch.vocab_size}",
            f"  num_layers: {arch.n_layers}",
            f"  tie_embeddings: {'true' if arch.tie_embeddings else 'false'}",
            f"  dtypes: {{weights: {d.weights}, kv_cache: {d.kv_cache}, state: {d.state}, conv_state: {d.conv_state}"
            + "".join(f", {k}: {getattr(d, k)}" for k in ("experts", "embeddings") if getattr(d, k) is not None)
            + "}",
            "  layers:",
        ]
        for i, group in enumerate(arch.layers):
            note = f"  # {group_notes[i]}" if i < len(group_notes) else ""
            out += _group_lines(group, note)
        if arch.mtp_layers:
            out.append("  mtp_layers:                        # multi-token-prediction modules (weights only)")
            for group in arch.mtp_layers:
                out += _group_lines(group, "")
    return "\n".join(out) + "\n"


#: How the card writer recognises its own files: the header ``card_yaml`` writes names the command.
OWNER = Owner(what="a model card written by prfaas-plan model import", comment_markers=(b"`prfaas-plan model import`",))


def write_card(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through ``report.files.write_file``: atomic, under the output's lock, and only
    over nothing, an empty file or a card this writer made (never a link, a device, a FIFO or another
    program's file). Raises InputError naming ``path``; nothing is left behind then."""
    write_file(path, text, owner=OWNER)


def card_summary(card: ModelCard) -> dict[str, Any]:
    """What a card implies, JSON-ready: layers by type, KV bytes per token, fixed per-request state (linear state
    plus full sliding windows), and parameter counts beside the published ones (billions)."""
    out: dict[str, Any] = {
        "key": card.key,
        "name": card.name,
        "inferred": card.inferred,
        "source": card.source,
        "published_parameters_b": card.parameters_b,
        "published_active_parameters_b": card.active_parameters_b,
    }
    arch = card.architecture
    if arch is None:
        return out
    window = max((g.attention.window for g in arch.layers if g.attention.kind == "swa"), default=0)
    swa = float(window_bytes(arch, np.float64(window)))
    linear = linear_state_bytes(arch)
    out.update(
        {
            "layers": [
                {
                    "count": g.count,
                    "attention": g.attention.kind,
                    "ffn": g.ffn.kind,
                    "window_tokens": g.attention.window,
                }
                for g in arch.layers
            ],
            "dtypes": {
                "weights": arch.dtypes.weights,
                "kv_cache": arch.dtypes.kv_cache,
                "state": arch.dtypes.state,
                "conv_state": arch.dtypes.conv_state,
                "experts": arch.dtypes.dtype_of("experts"),
                "embeddings": arch.dtypes.dtype_of("embeddings"),
            },
            "kv_bytes_per_token": kv_bytes_per_token(arch),
            "linear_state_bytes": linear,
            "swa_window_bytes": swa,
            "fixed_state_bytes": linear + swa,
            "parameters_b": parameter_count(arch) / 1e9,
            "active_parameters_b": parameter_count(arch, active=True) / 1e9,
        }
    )
    return out


def card_yaml(imported: ImportedCard) -> str:
    """The imported card as YAML text with its layer placement, judgement calls and unmapped fields as comments."""
    header = (
        f"{imported.card.name}: imported from {imported.config_file} "
        f"(model_type {imported.family}) by `prfaas-plan model import`. Check the figures against the release and "
        "add parameters_b / active_parameters_b from the model's own publication.",
    )
    return render_card(
        imported.card,
        header=header,
        group_notes=imported.group_notes,
        notes=imported.notes,
        unmapped=[(u.field, u.value, u.reason) for u in imported.unmapped],
    )
