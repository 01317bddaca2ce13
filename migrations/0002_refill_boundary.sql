-- The most recent refill boundary at or before `at`, in UTC: today's 00:00 for daily refills (refill_day null), or
-- 00:00 of the refill day of this month, or of last month when this month's has not come yet. A refill day past
-- the end of a month falls on that month's last day. Refills are applied lazily: a key whose last refill is
-- older than this boundary is due.
CREATE OR REPLACE FUNCTION keyhaven_refill_boundary(refill_day smallint, at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  WITH utc AS (SELECT (at AT TIME ZONE 'UTC') AS t),
  months AS (
    SELECT date_trunc('month', t) AS this_month, date_trunc('month', t) - interval '1 month' AS last_month, t FROM utc
  ),
  candidates AS (
    SELECT t,
      this_month + make_interval(days => least(refill_day::int, extract(day from this_month + interval '1 month - 1 day')::int) - 1) AS this_day,
      last_month + make_interval(days => least(refill_day::int, extract(day from last_month + interval '1 month - 1 day')::int) - 1) AS last_day
    FROM months
  )
  SELECT CASE
    WHEN refill_day IS NULL THEN date_trunc('day', (SELECT t FROM utc))
    WHEN this_day <= t THEN this_day
    ELSE last_day
  END AT TIME ZONE 'UTC'
  FROM candidates
$$;
