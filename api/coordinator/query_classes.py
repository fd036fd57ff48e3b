"""The 13 reference query classes of DESIGN.md section 6, as SQL the coordinator accepts.

Used by the tests (each compared with the synthetic profiler's ground truth), the benchmark
(bench/query.py) and docs/query.md. :func:`class_sql` fills the parameters of one corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

NS_PER_HOUR = 3_600_000_000_000
NS_PER_DAY = 24 * NS_PER_HOUR


@dataclass(frozen=True)
class ClassParams:
    now_ns: int  # the newest start time in the corpus: "the last hour" ends here
    window_start_ns: int  # start of the Q5/Q9-Q12 window
    window_end_ns: int
    root_function: str  # takes args['invoice']
    llm_function: str  # output['score'], args['customer']['tier']
    execution_id: str  # Q6 and Q8
    call_id: str  # Q8
    invoice_id: str  # Q9
    needle: str = "refund"  # Q10


PUBLIC_CLASSES = ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q13")
PRIVATE_CLASSES = ("Q8", "Q9", "Q10", "Q11", "Q12")


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def class_sql(p: ClassParams) -> dict[str, str]:
    window = f"started_at_ns >= {p.window_start_ns} AND started_at_ns < {p.window_end_ns}"
    return {
        "Q1": (
            "SELECT execution_id, status, started_at_ns FROM threads_v1 "
            f"WHERE is_root AND started_at_ns >= {p.now_ns - NS_PER_HOUR} "
            "ORDER BY started_at_ns DESC, execution_id LIMIT 100"
        ),
        "Q2": (
            f"SELECT function_name, intDiv(started_at_ns, {NS_PER_DAY}) AS day, count() AS calls "
            "FROM calls_v1 GROUP BY function_name, day ORDER BY function_name, day"
        ),
        "Q3": (
            "SELECT function_name, quantileExact(0.5)(duration_ns) AS p50, "
            "quantileExact(0.95)(duration_ns) AS p95, quantileExact(0.99)(duration_ns) AS p99 "
            "FROM calls_v1 WHERE duration_ns IS NOT NULL GROUP BY function_name ORDER BY function_name"
        ),
        "Q4": (
            f"SELECT function_name, intDiv(started_at_ns, {NS_PER_HOUR}) AS hour, count() AS calls, "
            "countIf(status = 'failed') AS failed, countIf(status = 'failed') / count() AS error_rate "
            "FROM calls_v1 GROUP BY function_name, hour ORDER BY function_name, hour"
        ),
        "Q5": (
            "SELECT execution_id, call_id, function_name, duration_ns FROM calls_v1 "
            f"WHERE is_llm AND {window} AND duration_ns IS NOT NULL "
            "ORDER BY duration_ns DESC, call_id LIMIT 20"
        ),
        "Q6": (
            "SELECT call_id, parent_call_id, function_name, started_at_ns, status FROM calls_v1 "
            f"WHERE execution_id = {_q(p.execution_id)} ORDER BY started_at_ns, call_id"
        ),
        "Q7": (
            "SELECT call_path_id, parent_call_path_id, sum(call_count) AS calls, sum(error_count) AS errors, "
            "sum(total_duration_ns) AS total_duration_ns FROM call_path_stats_v1 "
            f"WHERE function_name = {_q(p.llm_function)} "
            "GROUP BY call_path_id, parent_call_path_id ORDER BY calls DESC, call_path_id"
        ),
        "Q8": (
            "SELECT args, output, error FROM calls_v1 "
            f"WHERE execution_id = {_q(p.execution_id)} AND call_id = {_q(p.call_id)}"
        ),
        "Q9": (
            "SELECT execution_id, call_id, started_at_ns FROM calls_v1 "
            f"WHERE function_name = {_q(p.root_function)} AND {window} "
            f"AND args['invoice']['id'] = {_q(p.invoice_id)}"
        ),
        "Q10": (
            "SELECT execution_id, call_id, started_at_ns FROM calls_v1 "
            f"WHERE function_name = {_q(p.llm_function)} AND {window} "
            f"AND output LIKE {_q('%' + p.needle + '%')} ORDER BY started_at_ns DESC, call_id LIMIT 50"
        ),
        "Q11": (
            "SELECT execution_id, call_id, output['score'] AS score FROM calls_v1 "
            f"WHERE function_name = {_q(p.llm_function)} AND {window} "
            "ORDER BY score DESC, call_id, execution_id LIMIT 10"
        ),
        "Q12": (
            "SELECT args['customer']['tier'] AS tier, count() AS calls, avg(duration_ns) AS mean_duration_ns "
            f"FROM calls_v1 WHERE function_name = {_q(p.llm_function)} AND {window} "
            "GROUP BY tier ORDER BY tier"
        ),
        "Q13": (
            "SELECT 'output' AS role, output_state AS state, count() AS n FROM calls_v1 "
            "WHERE startsWith(output_state, 'lost:') GROUP BY state "
            "UNION ALL SELECT 'args' AS role, args_state AS state, count() AS n FROM calls_v1 "
            "WHERE startsWith(args_state, 'lost:') GROUP BY state "
            "UNION ALL SELECT 'index_state' AS role, index_state AS state, count() AS n FROM threads_v1 "
            "WHERE is_root AND index_state != 'complete' GROUP BY state "
            "UNION ALL SELECT 'status' AS role, status AS state, count() AS n FROM threads_v1 "
            "WHERE is_root AND status = 'abandoned' GROUP BY state"
        ),
    }
