"""For migrations that add a measure (schema.MEASURE_FIELDS) and derive it for stored messages: count what the
messages now say into their requests, sessions, conversations, roll-ups and sessions' usage by model, as the live
path counts them (rule 3: once per request, its largest; rule 5: in the hour and under the model of the request's
first message that reports it). Not a migration (Django's loader skips modules starting with "_")."""

_SESSION_DIMENSIONS = "w.tenant_id, {bucket}, x.tool, x.user_id, x.project, x.machine, w.model"


def count_into_counters(cursor, fields: tuple[str, ...], where: str | None = None) -> tuple[int, dict]:
    """Count `fields` of the stored messages that have them (`where`, on the message `m`; default: not NULL) into
    every counter. The counters must hold none of it yet (the columns were just added with 0). (the requests
    counted, {field: their sum})."""
    key = "COALESCE(m.llm_request_id::text, m.id::text)"
    largest = ", ".join(f"MAX(m.{f}) OVER (PARTITION BY m.session_id, {key}) AS {f}" for f in fields)
    reported = where or " OR ".join(f"m.{f} IS NOT NULL" for f in fields)
    cursor.execute(
        f"""CREATE TEMPORARY TABLE ace_counted ON COMMIT DROP AS
            SELECT DISTINCT ON (m.session_id, {key})
                   m.tenant_id, m.session_id, m.conversation_id, m.llm_request_id,
                   date_trunc('hour', m.created_at, 'UTC') AS hour, COALESCE(NULLIF(m.model, ''), r.model, '') AS model,
                   {largest}
            FROM sessions_app_message m LEFT JOIN sessions_app_llmrequest r ON r.id = m.llm_request_id
            WHERE ({reported}) AND m.api_calls IS NULL
            ORDER BY m.session_id, {key}, m.seq"""
    )
    sums = ", ".join(f"COALESCE(SUM({f}), 0) AS {f}" for f in fields)
    sums_of_w = ", ".join(f"COALESCE(SUM(w.{f}), 0) AS {f}" for f in fields)
    add = ", ".join(f"{f} = t.{f} + s.{f}" for f in fields)
    cursor.execute(f"SELECT COUNT(*), {sums} FROM ace_counted")
    counted, *totals = cursor.fetchone()
    updates = (
        f"""UPDATE sessions_app_llmrequest t SET {", ".join(f"{f} = COALESCE(s.{f}, 0)" for f in fields)}
            FROM ace_counted s WHERE t.id = s.llm_request_id""",
        f"""UPDATE sessions_app_session t SET {add}
            FROM (SELECT session_id, {sums} FROM ace_counted GROUP BY 1) s WHERE t.id = s.session_id""",
        f"""UPDATE sessions_app_conversation t SET {add}
            FROM (SELECT conversation_id, {sums} FROM ace_counted GROUP BY 1) s WHERE t.id = s.conversation_id""",
        f"""UPDATE sessions_app_usagehourly t SET {add}
            FROM (SELECT {_SESSION_DIMENSIONS.format(bucket="w.hour AS bucket")}, {sums_of_w}
                  FROM ace_counted w JOIN sessions_app_session x ON x.id = w.session_id
                  GROUP BY 1, 2, 3, 4, 5, 6, 7) s
            WHERE (t.tenant_id, t.hour, t.tool, t.user_id, t.project, t.machine, t.model)
                = (s.tenant_id, s.bucket, s.tool, s.user_id, s.project, s.machine, s.model)""",
        f"""UPDATE sessions_app_usagedaily t SET {add}
            FROM (SELECT {_SESSION_DIMENSIONS.format(bucket="(w.hour AT TIME ZONE 'UTC')::date AS bucket")}, {sums_of_w}
                  FROM ace_counted w JOIN sessions_app_session x ON x.id = w.session_id
                  GROUP BY 1, 2, 3, 4, 5, 6, 7) s
            WHERE (t.tenant_id, t.day, t.tool, t.user_id, t.project, t.machine, t.model)
                = (s.tenant_id, s.bucket, s.tool, s.user_id, s.project, s.machine, s.model)""",
        # A session's usage by model: on its day when the session has a row of that model that day, else on the
        # first day it has of that model (0026 put each session's usage by model of before on one day).
        f"""UPDATE sessions_app_sessionmodelusage t SET {add}
            FROM (SELECT session_id, model, day, {sums}
                  FROM (SELECT c.*, COALESCE(
                               (SELECT u.day FROM sessions_app_sessionmodelusage u WHERE u.session_id = c.session_id
                                AND u.model = c.model AND u.day = (c.hour AT TIME ZONE 'UTC')::date),
                               (SELECT MIN(u.day) FROM sessions_app_sessionmodelusage u
                                WHERE u.session_id = c.session_id AND u.model = c.model)) AS day
                        FROM ace_counted c) AS placed
                  GROUP BY 1, 2, 3) s
            WHERE (t.session_id, t.model, t.day) = (s.session_id, s.model, s.day)""",
    )
    for update in updates:
        cursor.execute(update)
    cursor.execute("DROP TABLE ace_counted")
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events for the ALTER TABLEs after it
    return counted, dict(zip(fields, totals, strict=True))
