//! `promote` over random trees: the copies are rows of the target, so the target and the
//! branches forked from it afterwards see them, and no other branch's view changes — not the
//! target's existing descendants, not the source's relatives. Items the source does not see
//! are refused with nothing written.

use memctl_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const KEYS: [&str; 3] = ["goal", "plan", "note"];

/// Branch `i` (i ≥ 1) forks from branch `parents[i - 1] % i`; each writes a core key, an event
/// and a record, some of them after its children were forked.
fn build(parents: &[u8]) -> (Store, Vec<String>) {
    let store = Store::open_in_memory(Config::default(), Clock::Fixed(1_700_000_000.0)).unwrap();
    let mut names = vec!["b0".to_string()];
    store.create_root("b0").unwrap();
    let write = |name: &str, i: usize| {
        store.core_set(name, KEYS[i % 3], &format!("value {i}"), CoreWrite::default()).unwrap();
        store.recall_append(name, "note", &format!("event of {name}"), &[]).unwrap();
        store.archival_add(name, &format!("record of {name}"), &["T".to_string()]).unwrap();
    };
    write("b0", 0);
    for (i, parent) in parents.iter().enumerate() {
        let name = format!("b{}", i + 1);
        let parent = names[*parent as usize % names.len()].clone();
        store.fork(&parent, Some(&name)).unwrap();
        write(&name, i + 1);
        // The parent writes again after the fork: the child must not see it.
        store.core_set(&parent, "late", &format!("after {name}"), CoreWrite::default()).unwrap();
        names.push(name);
    }
    (store, names)
}

fn views(store: &Store, names: &[String]) -> BTreeMap<String, View> {
    names.iter().map(|n| (n.clone(), store.view(n).unwrap())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn promote_reaches_the_target_and_its_later_forks_only(
        parents in prop::collection::vec(any::<u8>(), 1..8),
        src in any::<u8>(),
        dst in any::<u8>(),
        picks in prop::collection::vec(any::<u8>(), 1..4),
    ) {
        let (store, names) = build(&parents);
        let (src, dst) = (names[src as usize % names.len()].clone(), names[dst as usize % names.len()].clone());
        prop_assume!(src != dst);
        let seen = store.view(&src).unwrap();
        let items = Promotion {
            core: picks.iter().map(|p| seen.core[*p as usize % seen.core.len()].key.clone()).collect(),
            records: picks.iter().map(|p| seen.archival[*p as usize % seen.archival.len()].id).collect(),
            events: picks.iter().map(|p| seen.events[*p as usize % seen.events.len()].id).collect(),
        };
        let before = views(&store, &names);
        let outcome = store.promote(&src, &dst, &items, Some("found it")).unwrap();

        let after = views(&store, &names);
        for name in names.iter().filter(|n| **n != dst) {
            prop_assert_eq!(&after[name], &before[name], "{}'s view changed", name);
        }
        let later = store.fork(&dst, Some("later")).unwrap().branch;
        for target in [dst.as_str(), later.as_str()] {
            let view = store.view(target).unwrap();
            for key in &items.core {
                let wanted = &seen.core.iter().find(|e| &e.key == key).unwrap().value;
                let got = view.core.iter().find(|e| &e.key == key).map(|e| &e.value);
                prop_assert_eq!(got, Some(wanted), "core {} in {}", key, target);
            }
            for id in &items.records {
                let text = &seen.archival.iter().find(|r| r.id == *id).unwrap().text;
                prop_assert!(view.archival.iter().any(|r| &r.text == text), "record {} in {}", id, target);
            }
            for id in &items.events {
                let text = &seen.events.iter().find(|e| e.id == *id).unwrap().text;
                prop_assert!(view.events.iter().any(|e| &e.text == text), "event {} in {}", id, target);
            }
        }
        // Every copy written names its origin.
        let written: Vec<&Promoted> = outcome.promoted.iter().filter(|p| !p.skipped).collect();
        let origins = store.origins(&written.iter().map(|p| p.seq).collect::<Vec<_>>()).unwrap();
        for p in written {
            let origin = &origins[&p.seq];
            prop_assert_eq!((&origin.branch, origin.seq), (&src, p.from_seq));
            prop_assert_eq!(origin.note.as_deref(), Some("found it"));
        }
    }

    #[test]
    fn promoting_what_the_source_does_not_see_writes_nothing(
        parents in prop::collection::vec(any::<u8>(), 1..8),
        src in any::<u8>(),
        dst in any::<u8>(),
        which in 0..3u8,
    ) {
        let (store, names) = build(&parents);
        let (src, dst) = (names[src as usize % names.len()].clone(), names[dst as usize % names.len()].clone());
        prop_assume!(src != dst);
        let seen = store.view(&src).unwrap();
        // Something of another branch's view that the source does not see.
        let others: Vec<View> = names.iter().map(|n| store.view(n).unwrap()).collect();
        let mut items = Promotion { core: vec![seen.core[0].key.clone()], ..Promotion::default() };
        match which {
            0 => items.core.push("never_written".to_string()),
            1 => {
                let unseen = others.iter().flat_map(|v| &v.archival).find(|r| !seen.archival.iter().any(|s| s.id == r.id));
                prop_assume!(unseen.is_some());
                items.records.push(unseen.unwrap().id);
            }
            _ => {
                let unseen = others.iter().flat_map(|v| &v.events).find(|e| !seen.events.iter().any(|s| s.id == e.id));
                prop_assume!(unseen.is_some());
                items.events.push(unseen.unwrap().id);
            }
        }
        let before = (views(&store, &names), store.ops(None, None).unwrap().len());
        let err = store.promote(&src, &dst, &items, None).unwrap_err();
        prop_assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err);
        prop_assert_eq!((views(&store, &names), store.ops(None, None).unwrap().len()), before);
    }
}
