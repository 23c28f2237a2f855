//! memctl-core's integration tests, one module per subject, linked into one test binary.

mod concurrency;
mod consolidation;
mod conversation;
mod model;
/// A throwaway PostgreSQL cluster, shared with the CLI's tests.
#[path = "../../../../tests/support/postgres.rs"]
#[allow(dead_code)]
mod pg_cluster;
mod promote;
mod protocol;
mod regressions;
mod search;
mod smoke;
mod tokens;
