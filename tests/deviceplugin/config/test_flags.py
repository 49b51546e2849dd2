"""Every flag is declared once: the tables, the file model and the defaults all come from that declaration."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from kubegpu.deviceplugin.config import effective, flags, v1
from kubegpu.placement import policies

TABLES = {"plugin": effective.PLUGIN_FLAGS, "gfd": effective.GFD_FLAGS, "mps": effective.MPS_FLAGS}


@pytest.mark.parametrize("program", list(TABLES))
def test_no_two_flags_of_a_program_share_a_name_or_a_destination(program: str) -> None:
    table = TABLES[program]
    names = [n for spec in table for n in spec.names]
    assert len(names) == len(set(names))
    assert len({spec.dest for spec in table}) == len(table)


def _defaults() -> dict[str, object]:
    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    return effective.load(parser.parse_args([]), {}).to_dict()


KEYED = {s.key: s for s in effective.PLUGIN_FLAGS + effective.GFD_FLAGS if s.key}


@pytest.mark.parametrize("key", list(KEYED), ids=[".".join(k) for k in KEYED])
def test_every_keyed_flag_is_a_key_of_the_config_file_whose_default_loads(key: tuple[str, ...]) -> None:
    default: Any = _defaults()
    for part in key:
        default = default.get(part)  # None: unset by default (allocationPolicy), which a file may say with null
    document: dict[str, Any] = {}
    node = document
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = default
    parsed: Any = v1.parse_data(document).to_dict()
    for part in key:
        parsed = parsed.get(part) if isinstance(parsed, dict) else None
    assert parsed == default


def test_the_defaults_of_the_declarations_are_the_effective_defaults() -> None:
    parser = argparse.ArgumentParser()
    effective.add_arguments(parser)
    config = effective.load(parser.parse_args([]), {})
    assert config.flags == flags.finish(flags.Flags())
    assert config.options == flags.Options()


def test_the_policy_names_are_placements() -> None:
    assert set(flags.ALLOCATION_POLICIES) == set(policies.POLICIES)
    assert flags.WHOLE_GPU_POLICIES == policies.WHOLE_GPU_POLICIES
    assert flags.SHARED_POLICIES == policies.SHARED_POLICIES
