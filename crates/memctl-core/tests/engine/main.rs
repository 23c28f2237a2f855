//! memctl-core's integration tests, one module per subject, linked into one test binary.

mod concurrency;
mod consolidation;
mod conversation;
mod model;
mod promote;
mod protocol;
mod regressions;
mod search;
mod smoke;
mod tokens;
