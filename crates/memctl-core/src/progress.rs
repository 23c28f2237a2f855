//! Progress of long work (imports, exports, gc), for a caller that shows it. The engine prints
//! nothing: it tells the store's [`Progress`], which does nothing unless the caller set one.

/// What long operations report: a stage with a known number of steps, then steps done.
pub trait Progress {
    /// A new stage: `what` will take `total` steps.
    fn start(&self, what: &str, total: u64);
    /// `n` more steps of the current stage are done.
    fn advance(&self, n: u64);
    /// The stage is over.
    fn finish(&self);
}

/// The default: nothing shown.
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
