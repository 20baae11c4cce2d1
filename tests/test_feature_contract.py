"""The feature contract (issue 28): whatever a feature brings is declared, so nothing skips a seam.

These tests walk the built app and the registry: a table, tool, command, job or route that no
feature declares fails here with the name of what is missing, before a user meets the seam it
skipped (an export without its rows, a log with its token, a tool offered for every message).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from sqlalchemy import Column, types
from sqlmodel import SQLModel
from starlette.routing import Mount

import storage.models  # noqa: F401  # registers every table in the metadata
from bot.app.build import App, build_app
from bot.app.features import REGISTRY
from bot.feature import Feature, Input, Registry
from tests.support.app import make_settings


@pytest.fixture
def full_app(tmp_path: Path) -> App:
    """An app built with every optional tool switched on (nothing started)."""
    settings = make_settings(
        tmp_path,
        web_search_backend="searxng",
        searxng_url="http://127.0.0.1:9/search",
    )
    return build_app(settings)


def _tables_with_user_id() -> set[str]:
    return {t.name for t in SQLModel.metadata.sorted_tables if "user_id" in t.c}


def test_every_table_of_users_data_is_declared_by_exactly_one_feature() -> None:
    undeclared = _tables_with_user_id() - REGISTRY.user_tables()
    assert not undeclared, (
        f"tables no feature declares (export/delete would miss them): {undeclared}"
    )
    phantom = REGISTRY.user_tables() - _tables_with_user_id()
    assert not phantom, f"declared tables that do not exist or have no user_id: {phantom}"


def test_two_features_cannot_claim_one_table() -> None:
    a = Feature("a", "first", tables=("fact",))
    b = Feature("b", "second", tables=("fact",))
    with pytest.raises(ValueError, match="declared by a and b"):
        Registry((a, b))


def test_every_tool_is_declared_and_routed_by_an_intent(full_app: App) -> None:
    groups = {i.group for i in REGISTRY.intents()}
    always = REGISTRY.always_offered()
    problems = []
    for tool in full_app.tools.tools():
        if REGISTRY.owner_of("tools", tool.name) is None:
            problems.append(f"{tool.name}: no feature declares it")
        if not tool.group and tool.name not in always:
            problems.append(f"{tool.name}: no intent group, so it would join every tool list")
        elif tool.group and tool.group not in groups:
            problems.append(f"{tool.name}: group {tool.group!r} has no declared words")
    assert not problems, problems


def test_every_declared_tool_and_intent_exists(full_app: App) -> None:
    names = set(full_app.tools.names())
    declared = {t for f in REGISTRY.features for t in f.tools}
    assert declared <= names, f"declared but never registered: {declared - names}"
    groups = {t.group for t in full_app.tools.tools()}
    idle = {i.group for i in REGISTRY.intents()} - groups
    assert not idle, f"intents that route to no tool: {idle}"


def test_the_web_search_tool_is_not_offered_for_a_reminder(full_app: App) -> None:
    from bot.agent.intent import Confidence, Visibility, classify_intent

    intent = classify_intent("remind me at 5pm to call mum", full_app.tools)
    assert intent.confidence is Confidence.HIGH
    assert "web_search" not in Visibility(full_app.tools, intent).names()
    weather = classify_intent("what's the weather in Porto tomorrow?", full_app.tools)
    assert "web_search" in Visibility(full_app.tools, weather).names()


def test_every_command_and_job_is_declared(full_app: App) -> None:
    commands = {name for name, _help in full_app.commands.menu()}
    missing = {c for c in commands if REGISTRY.owner_of("commands", c) is None}
    assert not missing, f"commands no feature declares: {missing}"
    jobs = set(full_app.jobs.service.jobs)
    missing_jobs = {j for j in jobs if REGISTRY.owner_of("jobs", j) is None}
    assert not missing_jobs, f"jobs no feature declares: {missing_jobs}"


def test_every_command_is_declared_by_exactly_one_feature_and_lives_with_it(
    full_app: App,
) -> None:
    commands = [name for name, _help in full_app.commands.menu()]
    owners = {c: [f.name for f in REGISTRY.features if c in f.commands] for c in commands}
    assert {c: o for c, o in owners.items() if len(o) != 1} == {}
    # The dispatcher's package holds only the spine's commands (conversations: pairing,
    # linking, tasks, retry, questions back, threads); a feature's are in its own package.
    at_dispatch = {
        c
        for c in commands
        if (fn := full_app.commands.handler(c)) is not None
        and fn.__module__.startswith("bot.dispatch")
    }
    assert {c for c in at_dispatch if owners[c] != ["conversations"]} == set()


def test_a_command_has_one_handler_and_none_is_replaced_later(full_app: App) -> None:
    """The spine's /tz was a placeholder the jobs' /tz (towns, reminders follow) replaced."""
    tz = full_app.commands.handler("tz")
    assert tz is not None and tz.__module__ == "bot.jobs.commands"
    with pytest.raises(ValueError, match="/tz is registered twice"):
        full_app.commands.register("tz", tz, "set your time zone")


def test_every_input_kind_is_declared_by_one_feature_and_routed_by_the_dispatcher(
    full_app: App,
) -> None:
    dispatcher = full_app.dispatcher
    routed = [h.kind for h in (*dispatcher.early, *dispatcher.inputs)]
    assert len(routed) == len(set(routed)), f"two handlers for one input kind: {routed}"
    for kind in Input:
        owners = [f.name for f in REGISTRY.input_owners(kind)]
        assert len(owners) == 1, f"{kind} is declared by {owners or 'no feature'}"
        assert kind in routed, f"{kind} is declared by {owners[0]} but no handler takes it"


def _templates(routes: list[object]) -> list[str]:
    """Every path template the app serves (FastAPI keeps included routers as one route)."""
    found: list[str] = []
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:  # an included router: its routes with their full paths
            found.extend(str(c.path) for c in contexts())
        elif isinstance(route, APIRoute | Mount):
            found.append(route.path)
    return found


def test_every_http_route_is_declared(full_app: App) -> None:
    templates = _templates(list(full_app.web.app.routes))
    assert len(templates) > 50
    missing = [t for t in templates if REGISTRY.route_for(t) is None]
    assert not missing, f"routes no feature declares (no access rule, no body limit): {missing}"


def test_a_route_belongs_to_its_longest_declaration() -> None:
    feed = REGISTRY.route_for("/calendar/{secret}.ics")
    assert feed is not None
    assert feed.prefix == "/calendar/{secret}.ics"
    page = REGISTRY.route_for("/calendar/feed")
    assert page is not None
    assert page.prefix == "/calendar"
    assert REGISTRY.route_for("/calendarx") is None


def _looks_like_ids(column: Column[Any]) -> bool:
    """An integer column named ``*_id``/``*_ids``, or any JSON column."""
    sa_type = column.type
    if isinstance(sa_type, types.TypeDecorator):
        sa_type = sa_type.impl_instance
    if isinstance(sa_type, types.JSON):
        return True
    return isinstance(sa_type, types.Integer) and column.name.endswith(("_id", "_ids"))


def undeclared_id_columns(registry: Registry) -> list[str]:
    """Columns of users' tables that may hold ids and are declared no way at all.

    Each must be a foreign key (the metadata says so), a soft reference a feature declares
    (an import rewrites it) or declared not to be one.
    """
    declared = {(r.table, r.column) for r in registry.references()}
    declared |= {(n.table, n.column) for n in registry.not_references()}
    tables = {t.name: t for t in SQLModel.metadata.sorted_tables}
    missing = []
    for name in sorted(registry.user_tables() | {"user"}):
        for column in tables[name].columns:
            if column.foreign_keys or column.primary_key or not _looks_like_ids(column):
                continue
            if (name, column.name) not in declared:
                missing.append(f"{name}.{column.name}")
    return missing


def test_every_column_that_may_hold_ids_is_declared_a_reference_or_not() -> None:
    missing = undeclared_id_columns(REGISTRY)
    assert not missing, (
        "columns that may hold ids but no feature says (bot.feature.Reference: an import "
        f"rewrites it; NotReference: it holds none): {missing}"
    )


def test_a_feature_that_forgets_a_reference_fails_the_contract() -> None:
    forgetful = tuple(
        replace(f, references=tuple(r for r in f.references if r.column != "reply_to_id"))
        for f in REGISTRY.features
    )
    assert undeclared_id_columns(Registry(forgetful)) == ["message.reply_to_id"]
    new_table = Feature("new", "a table of ids", tables=("fact",))
    others = tuple(
        replace(
            f, tables=tuple(t for t in f.tables if t != "fact"), references=(), not_references=()
        )
        for f in REGISTRY.features
    )
    assert "fact.source_message_ids" in undeclared_id_columns(Registry((*others, new_table)))


def test_every_declared_reference_names_real_tables_and_columns() -> None:
    tables = {t.name: t for t in SQLModel.metadata.sorted_tables}
    users = REGISTRY.user_tables() | {"user"}
    places = [(r.table, r.column) for r in REGISTRY.references()]
    places += [(n.table, n.column) for n in REGISTRY.not_references()]
    problems = [
        f"{table}.{column}: no such column of a user table"
        for table, column in places
        if table not in users or column not in tables[table].c
    ]
    for ref in REGISTRY.references():
        shapes = [bool(ref.target), bool(ref.template), bool(ref.by), bool(ref.same_as)]
        if sum(shapes) != 1:
            problems.append(f"{ref.table}.{ref.column}: one of target, template, by, same_as")
        named = [ref.target, *(t for _v, t in ref.targets)]
        named += re.findall(r"\{([a-z_]+)\}", ref.template)
        problems += [
            f"{ref.table}.{ref.column}: {t} is not a user table"
            for t in named
            if t and t not in users
        ]
        if ref.by and not ref.path and ref.by not in tables[ref.table].c:
            problems.append(f"{ref.table}.{ref.column}: by {ref.by!r} is not a column")
    for kind in REGISTRY.file_kinds():
        if kind.key_ids and not kind.key_ids.startswith("{user}/"):
            problems.append(f"{kind.name}: a per-user key starts with {{user}}/")
    assert not problems, problems
