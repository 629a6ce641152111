//! The PostgreSQL store's schema (layer `store`): its migrations, run in
//! order under an advisory lock; the database records how many ran.

/// Migrations in order; the database records how many ran.
pub(super) const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE IF NOT EXISTS toolgate_calls (
    id BIGSERIAL PRIMARY KEY,
    time_ms BIGINT NOT NULL,
    caller TEXT,
    upstream TEXT,
    tool TEXT NOT NULL,
    arguments_digest TEXT NOT NULL,
    arguments TEXT,
    decision TEXT,
    rule TEXT,
    confirmation TEXT,
    status TEXT NOT NULL,
    latency_ms DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS toolgate_calls_time ON toolgate_calls (time_ms);
CREATE TABLE IF NOT EXISTS toolgate_nonces (
    nonce TEXT PRIMARY KEY,
    spent_ms BIGINT NOT NULL
);
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS grant_id TEXT;
CREATE TABLE IF NOT EXISTS toolgate_grants (
    id TEXT PRIMARY KEY,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    revoked_ms BIGINT,
    caller TEXT,
    upstream TEXT,
    tool TEXT NOT NULL,
    rule TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolgate_grants_tool ON toolgate_grants (tool);
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS cost DOUBLE PRECISION;
CREATE TABLE IF NOT EXISTS toolgate_spend (
    budget TEXT NOT NULL,
    scope TEXT NOT NULL,
    period TEXT NOT NULL,
    amount DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (budget, scope, period)
);
",
    "
CREATE TABLE IF NOT EXISTS toolgate_approvals (
    id TEXT PRIMARY KEY,
    opened_ms BIGINT NOT NULL,
    caller TEXT,
    tool TEXT NOT NULL,
    server TEXT NOT NULL,
    digest TEXT NOT NULL,
    question TEXT NOT NULL,
    remember TEXT,
    status TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS toolgate_approvals_waiting
    ON toolgate_approvals (tool, digest, COALESCE(caller, ''), (caller IS NULL))
    WHERE status = 'waiting';
CREATE INDEX IF NOT EXISTS toolgate_approvals_call ON toolgate_approvals (tool, digest);
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS result TEXT;
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS trace_id TEXT;
",
    // Budget reservations: one function call takes a hold under every cap
    // or none. It locks the rows in the order given (a caller's key, then
    // the total's), checks each, and only then adds to them all, so two
    // instances can never both take the last unit (`Hold::fits` is the
    // rule, stated the same way).
    "
ALTER TABLE toolgate_grants ADD COLUMN IF NOT EXISTS upstream_tool TEXT;
ALTER TABLE toolgate_grants ADD COLUMN IF NOT EXISTS digest TEXT;
ALTER TABLE toolgate_grants ADD COLUMN IF NOT EXISTS revoked_by TEXT;
ALTER TABLE toolgate_spend ADD COLUMN IF NOT EXISTS reserved DOUBLE PRECISION NOT NULL DEFAULT 0;
CREATE OR REPLACE FUNCTION toolgate_reserve(
    k_budget TEXT[], k_scope TEXT[], k_period TEXT[], k_cap DOUBLE PRECISION[],
    k_amount DOUBLE PRECISION, k_slack DOUBLE PRECISION
) RETURNS TABLE (o_index INTEGER, o_spent DOUBLE PRECISION, o_reserved DOUBLE PRECISION)
LANGUAGE plpgsql AS $$
DECLARE
    i INTEGER;
    s DOUBLE PRECISION;
    r DOUBLE PRECISION;
BEGIN
    FOR i IN 1 .. coalesce(array_length(k_budget, 1), 0) LOOP
        INSERT INTO toolgate_spend (budget, scope, period, amount, reserved)
            VALUES (k_budget[i], k_scope[i], k_period[i], 0, 0) ON CONFLICT DO NOTHING;
        SELECT t.amount, t.reserved INTO s, r FROM toolgate_spend t
            WHERE t.budget = k_budget[i] AND t.scope = k_scope[i] AND t.period = k_period[i]
            FOR UPDATE;
        IF (k_amount > 0 AND s + r + k_amount > k_cap[i] + k_slack)
            OR (k_amount <= 0 AND s + r >= k_cap[i]) THEN
            o_index := i - 1;
            o_spent := s;
            o_reserved := r;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
    UPDATE toolgate_spend t SET reserved = t.reserved + k_amount
        FROM unnest(k_budget, k_scope, k_period) AS k(b, sc, p)
        WHERE t.budget = k.b AND t.scope = k.sc AND t.period = k.p;
    RETURN;
END
$$;
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS endpoint TEXT;
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS shown TEXT;
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS flow TEXT;
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS flow_labels TEXT;
CREATE TABLE IF NOT EXISTS toolgate_flow_labels (
    key TEXT NOT NULL,
    class TEXT NOT NULL,
    tool TEXT NOT NULL,
    time_ms BIGINT NOT NULL,
    origin TEXT,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (key, class, tool)
);
CREATE INDEX IF NOT EXISTS toolgate_flow_labels_expiry ON toolgate_flow_labels (expires_ms);
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS identity TEXT;
CREATE TABLE IF NOT EXISTS toolgate_accounts (
    subject TEXT NOT NULL,
    server TEXT NOT NULL,
    sealed BYTEA NOT NULL,
    linked_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (subject, server)
);
",
    "
ALTER TABLE toolgate_calls ADD COLUMN IF NOT EXISTS via TEXT;
",
];

/// The advisory lock key of migrations ("toolgate" in ASCII).
pub(super) const MIGRATION_LOCK: i64 = 0x746f_6f6c_6761_7465;
