//! End-to-end tests of `memctl apply` and `memctl strip` (SPEC §4.7).

mod support;
