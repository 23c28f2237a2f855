//! The values that one read's rows share: a whole view builds thousands of events and records
//! with a handful of kinds and tag lists, and a copy of each for every row was most of what
//! sharing their names saved (rows.rs). Values are made from a column's text alone, so a read
//! may share them across its statements.

use crate::db::ValueRef;
use crate::error::Result;
use crate::schema::tags;
use std::sync::Arc;

/// Events' kinds and events' and records' tag lists, each made once per distinct stored text.
#[derive(Default)]
pub(super) struct Shared {
    kinds: Recent<Arc<str>>,
    tags: Recent<Arc<[String]>>,
}

impl Shared {
    pub(super) fn kind(&mut self, value: ValueRef<'_>) -> Result<Arc<str>> {
        Ok(self.kinds.get(value.as_str()?, |kind| kind.into()))
    }

    /// Tags from their stored JSON array.
    pub(super) fn tags(&mut self, value: ValueRef<'_>) -> Result<Arc<[String]>> {
        Ok(self.tags.get(value.as_str()?, |json| tags::parse(json).into()))
    }
}

/// Values made from the text of a column, kept for up to [`Recent::KEPT`] texts met (rows come
/// branch by branch: their repeats are near). A text met enters first and pushes the last out;
/// a text met again swaps places with the first, so texts that keep coming stay near the front.
/// A read whose texts rarely repeat (a tag unique to each row) stops keeping them once most
/// have missed: looking them up and copying them would only add to making each value.
struct Recent<T> {
    kept: Vec<(Box<str>, T)>,
    hits: usize,
    misses: usize,
}

impl<T> Default for Recent<T> {
    fn default() -> Self {
        Recent { kept: Vec::new(), hits: 0, misses: 0 }
    }
}

impl<T: Clone> Recent<T> {
    const KEPT: usize = 16;
    /// The misses after which it keeps texts only while at least as many have hit.
    const TRIAL: usize = 32;

    /// The value of `text`, made by `make` unless kept.
    fn get(&mut self, text: &str, make: impl FnOnce(&str) -> T) -> T {
        if !self.keeping() {
            return make(text);
        }
        if let Some(at) = self.kept.iter().position(|(kept, _)| **kept == *text) {
            self.hits += 1;
            self.kept.swap(0, at);
            return self.kept[0].1.clone();
        }
        self.misses += 1;
        let value = make(text);
        self.kept.truncate(Self::KEPT - 1);
        self.kept.insert(0, (text.into(), value.clone()));
        value
    }

    fn keeping(&self) -> bool {
        self.misses < Self::TRIAL || self.hits >= self.misses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make(text: &str) -> Arc<str> {
        text.into()
    }

    /// Equal kinds and equal tag lists share one value; a non-text kind is an error.
    #[test]
    fn equal_texts_share_a_value() {
        let mut shared = Shared::default();
        let first = shared.kind(ValueRef::Text("observation")).unwrap();
        assert!(Arc::ptr_eq(&first, &shared.kind(ValueRef::Text("observation")).unwrap()));
        let tags = shared.tags(ValueRef::Text(r#"["a","b"]"#)).unwrap();
        assert_eq!(&*tags, ["a".to_string(), "b".to_string()]);
        assert!(Arc::ptr_eq(&tags, &shared.tags(ValueRef::Text(r#"["a","b"]"#)).unwrap()));
        assert!(shared.kind(ValueRef::Int(1)).is_err(), "a kind is text");
    }

    /// A text met enters first and pushes the last out; a text met again swaps with the first.
    #[test]
    fn the_last_text_kept_leaves_first() {
        let mut recent = Recent::default();
        let texts: Vec<String> = (0..Recent::<Arc<str>>::KEPT).map(|i| format!("t{i}")).collect();
        let values: Vec<Arc<str>> = texts.iter().map(|t| recent.get(t, make)).collect();
        // Kept, newest first: t15 … t0. Meeting t0 again swaps it with t15, which goes last.
        assert!(Arc::ptr_eq(&recent.get("t0", make), &values[0]));
        assert_eq!(&*recent.get("new", make), "new");
        let again = recent.get("t15", make);
        assert_eq!(&*again, "t15");
        assert!(!Arc::ptr_eq(&again, &values[15]), "the last kept left when a new text entered");
        // "new" and "t15" pushed t1 out; t0 swapped back to the front, t2 is last.
        assert!(Arc::ptr_eq(&recent.get("t0", make), &values[0]));
        assert!(Arc::ptr_eq(&recent.get("t2", make), &values[2]));
        assert!(!Arc::ptr_eq(&recent.get("t1", make), &values[1]));
    }

    /// Through its trial it keeps texts whatever their hits; after it, only while at least as
    /// many have hit as missed, and once it stops it does not start again. Every value is right
    /// either way.
    #[test]
    fn texts_are_kept_while_they_repeat() {
        let trial = Recent::<Arc<str>>::TRIAL;
        let mut unique = Recent::default();
        for i in 0..trial - 1 {
            assert_eq!(&*unique.get(&format!("t{i}"), make), format!("t{i}"));
        }
        assert!(unique.keeping(), "still in its trial");
        let repeat = unique.get("t30", make);
        assert!(Arc::ptr_eq(&repeat, &unique.get("t30", make)));
        // 31 misses and 2 hits: one more miss ends the trial with more misses than hits.
        assert_eq!(&*unique.get("last", make), "last");
        assert!(!unique.keeping());
        let (a, b) = (unique.get("t30", make), unique.get("t30", make));
        assert_eq!((&*a, &*b), ("t30", "t30"));
        assert!(!Arc::ptr_eq(&a, &b), "no longer kept");

        // As many hits as misses past the trial keep it keeping; one more miss stops it.
        let mut even = Recent::default();
        for _ in 0..=trial {
            even.get("kept", make);
        }
        for i in 0..trial - 1 {
            even.get(&format!("t{i}"), make);
        }
        assert_eq!((even.misses, even.hits), (trial, trial));
        assert!(even.keeping());
        even.get("one more", make);
        assert!(!even.keeping());
        let mut repeating = Recent::default();
        for i in 0..4 * trial {
            assert_eq!(&*repeating.get(&format!("t{i}"), make), format!("t{i}"));
            for _ in 0..2 {
                assert_eq!(&*repeating.get("kept", make), "kept");
            }
        }
        assert!(repeating.keeping());
        assert!(Arc::ptr_eq(&repeating.get("kept", make), &repeating.get("kept", make)));
    }
}
