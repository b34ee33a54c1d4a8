"""SQL text that both dialects write alike, built from the declared columns: the token
columns' lists and sums, usage grouped by model or agent, the usage updates, a write key's
claim. ``core.statements`` and each dialect's ``sql`` call these with what differs."""

from __future__ import annotations

from collections.abc import Callable

from .syntax import Syntax
from .tables import DETAIL_COLUMNS, TOKEN_COLUMNS


def ensure_session_sql(least: str | None = None, groups: tuple[str, ...] = ()) -> str:
    """ENSURE_SESSION's SQL; with ``least`` (the dialect's two-argument minimum), a counted
    form (catalogue_sql's ENSURE_SESSION_COUNTED), which also adds to the session's totals
    what the write is known to add before it reads the head, of the ``groups`` it names
    (catalogue_sql.KNOWN_TOTALS: tool calls, :tool_calls; tokens, :tokens): the statement
    every write runs first counts them."""
    columns = values = sets = ""
    if least is not None and "tool_calls" in groups:
        columns, values = columns + ", tool_call_count", values + ", :tool_calls"
        sets += """,
            tool_call_count = sessions.tool_call_count + excluded.tool_call_count"""
    if least is not None and "tokens" in groups:
        columns, values = columns + ", total_tokens", values + ", :tokens"
        sets += f""",
            total_tokens = {least}(sessions.total_tokens, :max - excluded.total_tokens)
                           + excluded.total_tokens"""
    return f"""
        INSERT INTO sessions (session_id, title, created_at, updated_at{columns})
        VALUES (:sid, :title, :now, :now{values})
        ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at,
            title = coalesce(sessions.title, excluded.title){sets}"""


TOKENS = ", ".join(TOKEN_COLUMNS)
"""The token columns, as a select or insert list."""
USAGE = ", ".join((*TOKEN_COLUMNS, *DETAIL_COLUMNS))
"""The token and token details columns, as an insert list."""
USAGE_PARAMS = ", ".join(f":{column}" for column in (*TOKEN_COLUMNS, *DETAIL_COLUMNS))
"""``USAGE``'s parameters, named as the columns."""


def tokens(alias: str) -> str:
    """The token columns of the table ``alias``, as a select list."""
    return ", ".join(f"{alias}.{column}" for column in TOKEN_COLUMNS)


def token_sums(alias: str = "") -> str:
    """The sum of each token column (of the table ``alias``), named as the column."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"sum({prefix}{column}) AS {column}" for column in TOKEN_COLUMNS)


def response_usage_sql(column: str, filters: str, run_of_call: str, calls_of_run: str) -> str:
    """``USAGE_BY_MODEL`` / ``USAGE_BY_AGENT``: usage grouped by the runs' and model calls'
    ``column``, in a dialect whose usage filters are ``filters``.

    Tokens: each model call's go to its own agent (model), where the hooks recorded calls; a
    run without recorded calls gives its own totals. Runs: each is counted once, under the
    run's own ``column`` (its last model call's: the agent that answered), so a run with a
    handoff counts once, not under each agent that took part. ``run_of_call`` joins a call
    ``m`` to its run ``r``; ``calls_of_run`` finds the calls of the run ``r``.
    """
    unrecorded = ", ".join(
        f"CASE WHEN w.recorded THEN 0 ELSE w.{name} END" for name in TOKEN_COLUMNS
    )
    return f"""
        SELECT k AS key, sum(counted) AS runs, {token_sums()} FROM (
            SELECT m.{column} AS k, 0 AS counted, {tokens("m")}
            FROM model_responses m
            JOIN runs r ON {run_of_call} JOIN sessions s ON s.session_id = r.session_id
            WHERE {filters}
            UNION ALL
            SELECT w.k, 1, {unrecorded} FROM (
                SELECT r.{column} AS k,
                    EXISTS (SELECT 1 FROM model_responses m WHERE {calls_of_run}) AS recorded,
                    {tokens("r")}
                FROM runs r JOIN sessions s ON s.session_id = r.session_id
                WHERE {filters}
            ) w
        ) u
        GROUP BY k"""


def cost_parts_sql(
    keys: tuple[str, str], days: tuple[str, str], filters: str, run_of_call: str, calls_of_run: str
) -> str:
    """``USAGE_COST_BY_*``: the tokens of each group by model and UTC day, which a price table
    prices (core.queries.usage). Like ``response_usage_sql``, each model call's tokens go under
    its own model and day where the hooks recorded calls, else the run's totals under the
    run's; ``keys`` are the group's key of a call ``m`` and of a run ``r``, ``days`` their days.
    """
    return f"""
        SELECT k AS key, model, day, {token_sums()} FROM (
            SELECT {keys[0]} AS k, m.model AS model, {days[0]} AS day, {tokens("m")}
            FROM model_responses m
            JOIN runs r ON {run_of_call} JOIN sessions s ON s.session_id = r.session_id
            WHERE {filters}
            UNION ALL
            SELECT {keys[1]}, r.model, {days[1]}, {tokens("r")}
            FROM runs r JOIN sessions s ON s.session_id = r.session_id
            WHERE {filters}
              AND NOT EXISTS (SELECT 1 FROM model_responses m WHERE {calls_of_run})
        ) u
        GROUP BY k, model, day"""


def details_sums_sql(
    syntax: Syntax, keys: tuple[str | None, str], filters: str, run_of_call: str, calls_of_run: str
) -> str:
    """``USAGE_DETAILS_BY_*``: each group's token details, summed field by field. ``keys``
    are the group's key of a model call ``m`` and of a run ``r``: with a call's key (by model
    or agent) each model call's details count under it where the hooks recorded calls, else
    the run's own (as ``response_usage_sql``); without one, the runs' (as the runs' tokens)."""

    def fields(alias: str, key: str, joins: str, where: str) -> str:
        return " UNION ALL ".join(
            f"""
            SELECT {key} AS k, '{side}' AS side, j.key AS name, CAST(j.value AS BIGINT) AS n
            FROM {joins}, {syntax.json_members}({alias}.{side}_tokens_details) j
            WHERE {filters} AND {syntax.json_count("j")}{where}"""
            for side in ("input", "output")
        )

    sessions = "JOIN sessions s ON s.session_id = r.session_id"
    runs = f"runs r {sessions}"
    if keys[0] is None:
        parts = fields("r", keys[1], runs, "")
    else:
        calls = f"model_responses m JOIN runs r ON {run_of_call} {sessions}"
        unrecorded = f" AND NOT EXISTS (SELECT 1 FROM model_responses m WHERE {calls_of_run})"
        parts = (
            f"{fields('m', keys[0], calls, '')} UNION ALL {fields('r', keys[1], runs, unrecorded)}"
        )
    return f"""
        SELECT k AS key, side, name, sum(n) AS total FROM ({parts}
        ) u
        GROUP BY k, side, name"""


# Each token column's largest value, as a parameter: requests is an INTEGER on PostgreSQL.
_TOKEN_MAX = {"requests": ":max_requests"}


def add_usage_sql(least: str, where: str, details: Callable[[str], str]) -> str:
    """``ADD_RUN_USAGE`` in a dialect whose two-argument minimum is ``least`` and whose sum of
    a details column and its parameter, field by field, ``details`` writes."""
    sets = "".join(
        f"\n            {column} = {least}({column}, {_TOKEN_MAX.get(column, ':max')} - :{column})"
        f" + :{column},"
        for column in TOKEN_COLUMNS
    )
    merges = "".join(f"\n            {column} = {details(column)}," for column in DETAIL_COLUMNS)
    return f"""
        -- A sum stops at its column's largest value: a usage figure never fails a turn.
        UPDATE runs SET{sets}{merges}
            updated_at = :now
        WHERE {where}"""


def details_sum_sql(syntax: Syntax, column: str) -> str:
    """A token details column plus its parameter, field by field (each sum stopping at the
    largest count, as the token columns' do); the column as it is when the parameter is NULL.
    A field holding no integer is left out (the SDK's details hold counts alone)."""
    param = syntax.param(column, "jsonb")
    return f"""CASE WHEN {param} IS NULL THEN {column} ELSE (
                SELECT {syntax.json_object}(f.name, f.total) FROM (
                    SELECT j.key AS name, CASE WHEN count(*) = 1 THEN max(j.n)
                        ELSE {syntax.least}(max(j.n), :max - min(j.n)) + min(j.n) END AS total
                    FROM (SELECT m.key, CAST(m.value AS BIGINT) AS n
                          FROM (SELECT {column} AS d UNION ALL SELECT {param}) x,
                               {syntax.json_members}(x.d) m
                          WHERE {syntax.json_count("m")}) j
                    GROUP BY j.key) f) END"""


def set_usage_sql(where: str) -> str:
    """``SET_RUN_USAGE`` of the runs ``where`` selects."""
    sets = ", ".join(f"{column} = :{column}" for column in (*TOKEN_COLUMNS, *DETAIL_COLUMNS))
    return f"""
        UPDATE runs SET {sets}, updated_at = :now
        WHERE {where}"""


def claim_operation_sql(stale: str, result: str) -> str:
    """CLAIM_OPERATION's SQL: ``stale`` the dialect's answer to whether the session holds
    keys before ``:before`` to forget, ``result`` the guess it stores (``:result``, or with
    ``:head`` the session's head run where the dialect reads it)."""
    return f"""
        INSERT INTO operations (session_id, op_id, result) VALUES (:sid, :key, {result})
        ON CONFLICT DO NOTHING RETURNING 1 AS claimed, {stale} AS stale, result"""
