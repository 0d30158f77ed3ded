"""``prfaas-plan model``: turn a Hugging Face config.json into a model card; show what a card implies."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from prfaas_plan.cli.common import card_owner, check_output, emit, handled

model_app = typer.Typer(
    no_args_is_help=True,
    help="Model cards: import a Hugging Face config.json as a card, or show the sizes a card implies.",
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]


@model_app.command("import")
def import_config(
    config: Annotated[Path, typer.Argument(help="A local Hugging Face config.json.", show_default=False)],
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the card here (default: print it).", show_default=False)
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The card's model name (default: from the config or file name).")
    ] = None,
    json_output: JsonOpt = False,
) -> None:
    """Turn a config.json (llama, qwen3_moe, qwen3_next, qwen3_5_moe, kimi_linear, mimo_v2_flash, minimax_m2,
    deepseek_v3) into a model card, and list the fields the card cannot express.

    Example: prfaas-plan model import ~/models/Qwen3-235B-A22B/config.json --out workloads/models/qwen3-235b.yaml
    """
    from prfaas_plan.errors import InputError
    from prfaas_plan.io.hf_import import import_hf_config
    from prfaas_plan.report.card import card_yaml, write_card

    with handled():
        if out is not None:
            check_output(os.fspath(out), "--out", card_owner())
        imported = import_hf_config(config, name=name)
        text = card_yaml(imported)
        if out is not None:
            try:
                write_card(out, text)
            except InputError as exc:  # the library names the path; the user gave it as --out
                raise InputError([replace(p, field="--out") for p in exc.problems]) from None
    unmapped = [{"field": u.field, "value": u.value, "reason": u.reason} for u in imported.unmapped]
    if json_output:
        target = None if out is None else str(out)
        emit({"model_type": imported.family, "out": target, "card_yaml": text, "unmapped": unmapped})
        return
    if out is None:
        print(text, end="")
    else:
        print(f"wrote {out} (model_type {imported.family}, {len(imported.group_notes)} layer groups)")
    stream = sys.stderr if out is None else sys.stdout  # keep stdout a clean card when it carries the card
    print(f"not mapped ({len(unmapped)} fields; listed as comments in the card):", file=stream)
    for u in imported.unmapped:
        print(f"  {u.field} = {u.value}: {u.reason}", file=stream)


@model_app.command("show")
def show(
    card: Annotated[str, typer.Argument(help="A model card YAML file, or a built-in card name.", show_default=False)],
    json_output: JsonOpt = False,
) -> None:
    """Show a card's layers, KV bytes per token, fixed per-request state and parameter counts.

    Example: prfaas-plan model show qwen3.5-397b-a17b
    """
    from prfaas_plan.io.names import load_named_model
    from prfaas_plan.report.card import card_summary

    with handled():
        summary = card_summary(load_named_model(card, "CARD"))
    if json_output:
        emit(summary)
        return
    if "prfaas_plan.cli.render" in sys.modules:
        from prfaas_plan.cli.render import table_format

        if table_format() != "table":
            _show_tables(summary)
            return
    print(f"{summary['name']} ({summary['key']}){' - INFERRED architecture' if summary['inferred'] else ''}")
    if "layers" not in summary:
        print("  no architecture section")
        return
    for group in summary["layers"]:
        window = f" (window {group['window_tokens']})" if group["attention"] == "swa" else ""
        print(f"  {group['count']:>3} x {group['attention']}{window} + {group['ffn']} FFN")
    print(f"  KV cache: {summary['kv_bytes_per_token']:,.0f} B/token ({summary['dtypes']['kv_cache']})")
    print(f"  fixed state: {summary['fixed_state_bytes']:,.0f} B per request (once the prompt fills every window)")
    published = summary["published_parameters_b"]
    print(
        f"  parameters: {summary['parameters_b']:.2f}B total, {summary['active_parameters_b']:.2f}B active "
        f"(published: {'-' if published is None else f'{published:g}B'})"
    )


def _show_tables(summary: dict[str, Any]) -> None:
    """``model show`` under ``--format csv|md``: the layer groups, then the card's figures, as two tables."""
    from prfaas_plan.cli.render import DataTable, console

    out = console()
    layers = DataTable(title=f"{summary['name']} ({summary['key']}): layer groups", title_justify="left")
    for header in ("layers", "attention", "window (tokens)", "FFN"):
        layers.add_column(header)
    layers.data_header = ["layers", "attention", "window_tokens", "ffn"]  # the header even with no rows
    for group in summary.get("layers", []):
        window = group.get("window_tokens") if group["attention"] == "swa" else None
        layers.add_row(str(group["count"]), group["attention"], "" if window is None else f"{window:,}", group["ffn"])
        layers.add_data(
            {"layers": group["count"], "attention": group["attention"], "window_tokens": window, "ffn": group["ffn"]}
        )
    out.print(layers)
    if "layers" not in summary:
        out.print("no architecture section")  # a note: left out of csv, as notes are
        return
    figures = DataTable(title=f"{summary['name']} ({summary['key']}): per-card figures", title_justify="left")
    for header in (
        "KV (B/token)",
        "KV dtype",
        "fixed state (B/request)",
        "parameters (B)",
        "active (B)",
        "published (B)",
        "inferred",
    ):
        figures.add_column(header)
    published = summary["published_parameters_b"]
    figures.add_row(
        f"{summary['kv_bytes_per_token']:,.0f}",
        str(summary["dtypes"]["kv_cache"]),
        f"{summary['fixed_state_bytes']:,.0f}",
        f"{summary['parameters_b']:.2f}",
        f"{summary['active_parameters_b']:.2f}",
        "-" if published is None else f"{published:g}",
        "yes" if summary["inferred"] else "no",
    )
    figures.add_data(
        {
            "kv_bytes_per_token": summary["kv_bytes_per_token"],
            "kv_dtype": summary["dtypes"]["kv_cache"],
            "fixed_state_bytes_per_request": summary["fixed_state_bytes"],
            "parameters_billion": summary["parameters_b"],
            "active_parameters_billion": summary["active_parameters_b"],
            "published_parameters_billion": published,
            "inferred_architecture": bool(summary["inferred"]),
        }
    )
    out.print(figures)
