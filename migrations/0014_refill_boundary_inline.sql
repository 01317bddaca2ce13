-- The refill boundary of migration 0002, same values, written as one expression so that PostgreSQL inlines it into
-- the statements that call it (issue 13 §0). The CTE form could not be inlined: every statement that read or spent
-- a key with a refill ran it through the SQL-function executor, parsing and planning its body again per statement and
-- running a small query per row: a statement spending 12 keys with monthly refills took twice as long in PostgreSQL
-- (docs/benchmarks.md). Inlining needs a lone SELECT of one expression, no FROM; an argument may appear several times
-- because the callers pass a column and now(), both cheap and not volatile.
-- `at` in UTC: the month's first day, plus the refill day clamped to the month's length, minus one; last month's
-- length is the day before this month's first.
CREATE OR REPLACE FUNCTION keyhaven_refill_boundary(refill_day smallint, at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (CASE
    WHEN refill_day IS NULL THEN date_trunc('day', at AT TIME ZONE 'UTC')
    WHEN date_trunc('month', at AT TIME ZONE 'UTC')
        + make_interval(days => least(refill_day::int,
            extract(day from date_trunc('month', at AT TIME ZONE 'UTC') + interval '1 month - 1 day')::int) - 1)
        <= at AT TIME ZONE 'UTC'
      THEN date_trunc('month', at AT TIME ZONE 'UTC')
        + make_interval(days => least(refill_day::int,
            extract(day from date_trunc('month', at AT TIME ZONE 'UTC') + interval '1 month - 1 day')::int) - 1)
    ELSE date_trunc('month', at AT TIME ZONE 'UTC') - interval '1 month'
        + make_interval(days => least(refill_day::int,
            extract(day from date_trunc('month', at AT TIME ZONE 'UTC') - interval '1 day')::int) - 1)
  END) AT TIME ZONE 'UTC'
$$;
