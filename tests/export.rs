//! Placeholder until the suite lands.

mod support;
