//! memctl's end-to-end tests: the real binary run in temporary directories (see `support`),
//! one module per command family, linked into one test binary so the build links once.
//! Snapshots live in `tests/snapshots/`, named `e2e__<module>__<name>.snap`.

#[macro_use]
mod support;

mod apply;
mod cli;
mod conversation;
mod export;
mod import;
mod inspect;
mod lifecycle;
mod memory_pressure;
mod postgres;
mod viewer;
