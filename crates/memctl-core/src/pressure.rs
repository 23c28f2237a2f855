//! Memory pressure (SPEC §4.6): how full a branch's view is, and what would relieve it.

use crate::core_kv::rendered_chars;
use crate::error::Result;
use crate::store::Store;
use crate::view;
use serde::Serialize;

/// Pressure levels, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Low,
    Medium,
    High,
    Critical,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CorePressure {
    /// Characters of the visible core as rendered.
    pub used: usize,
    pub max: usize,
    pub ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecallPressure {
    /// Visible events besides the conversation's steps: those consolidation reduces (`compact`
    /// reduces the steps).
    pub count: usize,
    /// Visible conversation steps, not in `count`.
    pub steps: usize,
    pub max: usize,
    pub ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArchivalSize {
    pub count: usize,
    pub chars: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pressure {
    pub level: Level,
    /// 0.6 × core ratio + 0.4 × min(recall ratio, 1), to 4 decimal places.
    pub overall_ratio: f64,
    pub core: CorePressure,
    pub recall: RecallPressure,
    pub archival: ArchivalSize,
    /// By name: `consolidate_recall`, `summarize_recall`, `evict_core`, `compress_core`,
    /// `prune_archival`.
    pub recommendations: Vec<&'static str>,
}

/// More archival records than this in a view suggests pruning.
const ARCHIVAL_PRUNE_COUNT: usize = 100;

impl Store {
    /// The pressure on a branch's view. Reads everything it counts; writes nothing.
    pub fn pressure(&self, branch: &str) -> Result<Pressure> {
        let (core, events, texts) = self.read(|| {
            let path = self.path(branch)?;
            Ok((
                view::core(self, &path)?,
                view::event_counts(self, path.branch().bid)?,
                view::current_text_chars(self, &path)?,
            ))
        })?;
        let config = &self.config;
        let ratio = |used: usize, max: usize| if max == 0 { 0.0 } else { used as f64 / max as f64 };
        let used = rendered_chars(&core);
        let core =
            CorePressure { used, max: config.core_max_chars, ratio: ratio(used, config.core_max_chars) };
        let recall = RecallPressure {
            count: events.besides_steps(),
            steps: events.steps,
            max: config.recall_max_events,
            ratio: ratio(events.besides_steps(), config.recall_max_events),
        };
        let archival = ArchivalSize { count: texts.len(), chars: texts.iter().sum() };
        // To 4 places, as a reader would write it (0.4563, not 0.45629999999999993); the level
        // follows the figure shown.
        let overall_ratio = ((0.6 * core.ratio + 0.4 * recall.ratio.min(1.0)) * 1e4).round() / 1e4;
        let thresholds = &config.pressure_thresholds;
        let level = if overall_ratio >= thresholds.critical {
            Level::Critical
        } else if overall_ratio >= thresholds.high {
            Level::High
        } else if overall_ratio >= thresholds.medium {
            Level::Medium
        } else {
            Level::Low
        };
        let mut recommendations = Vec::new();
        if recall.ratio > 1.0 {
            recommendations.push("consolidate_recall");
        }
        if recall.ratio > thresholds.medium {
            recommendations.push("summarize_recall");
        }
        if core.ratio > thresholds.high {
            recommendations.push("evict_core");
        }
        if core.ratio > thresholds.medium {
            recommendations.push("compress_core");
        }
        if archival.count > ARCHIVAL_PRUNE_COUNT {
            recommendations.push("prune_archival");
        }
        Ok(Pressure { level, overall_ratio, core, recall, archival, recommendations })
    }
}
