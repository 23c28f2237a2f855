//! Archival and recall search (SPEC §3, §4.3, §4.4). Every scenario runs twice on the same data —
//! with FTS5 (the default) and with the keyword fallback (`search.fts = "off"`) — and both runs
//! must give the same answers: both rank with the same bm25 over the view's matches, so the
//! same ids come back in the same order with the same scores.

use memctl_core::*;
use std::collections::BTreeSet;
use std::fmt::Debug;

const T0: f64 = 1_700_000_000.0;

fn open(fts: FtsMode) -> Store {
    open_indexing_by(fts, SearchConfig::default().fts_batch.get())
}

/// [`open`] with an FTS5 index that takes new records `batch` at a time.
fn open_indexing_by(fts: FtsMode, batch: u32) -> Store {
    let mut config = Config::default();
    config.search.fts = fts;
    config.search.fts_batch = std::num::NonZeroU32::new(batch).unwrap();
    // Keep every appended event in the view, whatever the consolidation policy.
    config.auto_consolidate = false;
    Store::open_in_memory(config, Clock::Fixed(T0)).unwrap()
}

/// Runs `scenario` on FTS5 stores and on a keyword-fallback store, and checks that all runs
/// return the same value. The FTS5 stores index every record as it is written, or three at a
/// time, so that their searches find records both in the index and past its end.
fn in_both_modes<R: PartialEq + Debug>(scenario: impl Fn(&Store) -> R) -> R {
    let keyword = open(FtsMode::Off);
    assert!(!keyword.uses_fts().unwrap());
    let with_keywords = scenario(&keyword);
    for batch in [1, 3] {
        let fts = open_indexing_by(FtsMode::Auto, batch);
        assert!(fts.uses_fts().unwrap(), "this SQLite build has no FTS5");
        let with_fts = scenario(&fts);
        assert_eq!(
            with_fts, with_keywords,
            "FTS5 (left, batches of {batch}) and the keyword fallback (right) disagree"
        );
    }
    with_keywords
}

fn mode(s: &Store) -> &'static str {
    if s.uses_fts().unwrap() {
        "fts5"
    } else {
        "keyword"
    }
}

fn tags(list: &[&str]) -> Vec<String> {
    list.iter().map(|t| t.to_string()).collect()
}

fn add(s: &Store, branch: &str, text: &str, with_tags: &[&str]) -> i64 {
    let out = s.archival_add(branch, text, &tags(with_tags)).unwrap();
    assert!(!out.skipped, "{text}");
    out.id
}

/// Records that match no query of the test, so that no query word is in half the corpus (bm25
/// gives such words almost no weight).
fn filler(s: &Store, branch: &str, n: usize, tokens: usize) {
    let offset = s.archival_list(branch, None).unwrap().len();
    for i in offset..offset + n {
        let text: Vec<String> = (0..tokens).map(|j| format!("pad{i}x{j}")).collect();
        add(s, branch, &text.join(" "), &[]);
    }
}

fn hits(s: &Store, branch: &str, query: &str, k: usize, with_tags: &[&str]) -> Vec<Record> {
    s.archival_search(branch, &Search { query: query.to_string(), k, tags: tags(with_tags) })
        .unwrap_or_else(|e| panic!("{}: search {query:?} failed: {e}", mode(s)))
}

fn ids(s: &Store, branch: &str, query: &str, k: usize, with_tags: &[&str]) -> Vec<i64> {
    let found = hits(s, branch, query, k, with_tags);
    let scores: Vec<f64> = found.iter().filter_map(|r| r.score).collect();
    if !query.trim().is_empty() {
        assert_eq!(scores.len(), found.len(), "{}: hits carry a score", mode(s));
        assert!(
            scores.windows(2).all(|w| w[0] >= w[1]),
            "{}: {query:?} not ranked best first: {scores:?}",
            mode(s)
        );
    }
    found.iter().map(|r| r.id).collect()
}

fn sorted(mut v: Vec<i64>) -> Vec<i64> {
    v.sort();
    v
}

#[test]
fn words_are_ored_and_more_matched_words_rank_higher() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 6, 6);
        let c = add(s, "root", "gamma zc1 zc2 zc3 zc4 zc5", &[]);
        let a = add(s, "root", "alpha beta gamma xa1 xa2 xa3", &[]);
        let d = add(s, "root", "unrelated w1 w2 w3 w4 w5", &[]);
        let b = add(s, "root", "Alpha BETA yb1 yb2 yb3 yb4", &[]);
        filler(s, "root", 6, 6);
        let m = mode(s);
        assert_eq!(ids(s, "root", "alpha beta gamma", 10, &[]), vec![a, b, c], "{m}");
        assert_eq!(ids(s, "root", "gamma beta alpha", 10, &[]), vec![a, b, c], "{m}");
        assert_eq!(ids(s, "root", "alpha beta gamma", 2, &[]), vec![a, b], "{m}");
        assert_eq!(ids(s, "root", "ALPHA gamma", 10, &[]), vec![a, b, c], "{m}");
        assert_eq!(ids(s, "root", "gamma nothing-here", 10, &[]), vec![a, c], "{m}");
        assert_eq!(ids(s, "root", "unrelated", 10, &[]), vec![d], "{m}");
        assert!(ids(s, "root", "delta epsilon", 10, &[]).is_empty(), "{m}");
        // A word matches whole words only.
        assert!(ids(s, "root", "alph gam", 10, &[]).is_empty(), "{m}");
        vec![a, b, c, d]
    });
}

#[test]
fn ties_are_newest_first() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 10, 3);
        let d1 = add(s, "root", "delta q1 r1", &[]);
        let d2 = add(s, "root", "delta q2 r2", &[]);
        let de = add(s, "root", "delta epsilon r9", &[]);
        let d3 = add(s, "root", "delta q3 r3", &[]);
        let d4 = add(s, "root", "delta q4 r4", &[]);
        filler(s, "root", 10, 3);
        let d5 = add(s, "root", "delta q5 r5", &[]);
        let m = mode(s);
        assert_eq!(ids(s, "root", "delta", 10, &[]), vec![d5, d4, d3, de, d2, d1], "{m}");
        assert_eq!(ids(s, "root", "delta epsilon", 10, &[]), vec![de, d5, d4, d3, d2, d1], "{m}");
        assert_eq!(ids(s, "root", "delta", 3, &[]), vec![d5, d4, d3], "{m}");
        // One word each: equal scores again, newest first.
        assert_eq!(ids(s, "root", "q1 q4 q2", 10, &[]), vec![d4, d2, d1], "{m}");
        vec![d1, d2, d3, d4, d5, de]
    });
}

#[test]
fn english_stop_words_are_dropped_from_queries() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 12, 5);
        let s1 = add(s, "root", "the cache of the gpu", &[]);
        let s2 = add(s, "root", "the of and the to", &[]);
        let s3 = add(s, "root", "cache pressure notes here now", &[]);
        let m = mode(s);
        // "what", "is", "the" are dropped: only "cache" is searched.
        assert_eq!(ids(s, "root", "what is the cache", 10, &[]), vec![s3, s1], "{m}");
        assert_eq!(ids(s, "root", "The GPU", 10, &[]), vec![s1], "{m}");
        assert_eq!(ids(s, "root", "with the gpu and of it", 10, &[]), vec![s1], "{m}");
        // A query of stop words only still means those words.
        assert_eq!(ids(s, "root", "the of", 10, &[]), vec![s2, s1], "{m}");
        vec![s1, s2, s3]
    });
}

#[test]
fn an_empty_query_lists_newest_first() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        let r1 = add(s, "root", "first record", &["keep"]);
        let r2 = add(s, "root", "second record", &[]);
        let r3 = add(s, "root", "third record", &["keep"]);
        let r4 = add(s, "root", "fourth record", &[]);
        let m = mode(s);
        assert_eq!(ids(s, "root", "", 10, &[]), vec![r4, r3, r2, r1], "{m}");
        assert_eq!(ids(s, "root", "   ", 2, &[]), vec![r4, r3], "{m}");
        assert_eq!(ids(s, "root", "", 10, &["keep"]), vec![r3, r1], "{m}");
        assert_eq!(ids(s, "root", "", 1, &["keep"]), vec![r3], "{m}");
        assert!(ids(s, "root", "", 0, &[]).is_empty(), "{m}");
        // An update makes its record the newest.
        s.archival_update("root", r1, Some("first record, revised"), None).unwrap();
        assert_eq!(ids(s, "root", "", 10, &[]), vec![r1, r4, r3, r2], "{m}");
        vec![r1, r2, r3, r4]
    });
}

#[test]
fn tag_filters_are_anded_and_applied_before_the_limit() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 30, 6);
        // Every tagged record has 6 tokens in text plus tags, so their bm25 scores tie.
        let t_a = add(s, "root", "kernel fusion note one two", &["gpu"]);
        let t_ab1 = add(s, "root", "kernel fusion note three", &["gpu", "fp16"]);
        let t_b = add(s, "root", "kernel fusion note four five", &["fp16"]);
        let t_abc = add(s, "root", "kernel fusion note", &["gpu", "fp16", "ablation"]);
        let t_ab2 = add(s, "root", "kernel fusion note six", &["gpu", "fp16"]);
        // Better untagged matches.
        for i in 0..10 {
            add(s, "root", &format!("kernel kernel kernel u{i} v{i} w{i}"), &[]);
        }
        let m = mode(s);
        assert_eq!(ids(s, "root", "kernel", 2, &["gpu", "fp16"]), vec![t_ab2, t_abc], "{m}");
        assert_eq!(ids(s, "root", "kernel", 10, &["gpu", "fp16"]), vec![t_ab2, t_abc, t_ab1], "{m}");
        assert_eq!(ids(s, "root", "kernel", 10, &["gpu"]), vec![t_ab2, t_abc, t_ab1, t_a], "{m}");
        assert_eq!(ids(s, "root", "fusion", 10, &["fp16"]), vec![t_ab2, t_abc, t_b, t_ab1], "{m}");
        assert_eq!(ids(s, "root", "kernel", 10, &["fp16", "ablation"]), vec![t_abc], "{m}");
        assert_eq!(ids(s, "root", "", 2, &["gpu", "fp16"]), vec![t_ab2, t_abc], "{m}");
        assert!(ids(s, "root", "kernel", 10, &["gpu", "cpu"]).is_empty(), "{m}");
        assert!(ids(s, "root", "u1", 10, &["gpu"]).is_empty(), "{m}");
        // The untagged matches win without a filter.
        assert_eq!(ids(s, "root", "kernel", 10, &[]).len(), 10, "{m}");
        // Results carry their tags as a list.
        let hit = &hits(s, "root", "kernel", 1, &["ablation"])[0];
        assert_eq!(*hit.tags, tags(&["gpu", "fp16", "ablation"]), "{m}");
        // Tag words are searchable as words too.
        assert_eq!(sorted(ids(s, "root", "ablation", 10, &[])), vec![t_abc], "{m}");
        vec![t_a, t_ab1, t_b, t_abc, t_ab2]
    });
}

#[test]
fn only_the_current_version_is_found_and_only_where_the_update_is_seen() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 10, 4);
        let r = add(s, "root", "original wording about lattice", &["doc"]);
        let keep = add(s, "root", "another wording entirely different", &[]);
        s.fork("root", Some("c1")).unwrap();
        s.fork("root", Some("c2")).unwrap();
        s.archival_update("c1", r, Some("revised wording about mesh"), None).unwrap();
        s.fork("c1", Some("g")).unwrap();
        s.archival_update("root", r, Some("root wording rewrote about torus"), None).unwrap();
        let m = mode(s);
        for (branch, now, gone) in [
            ("root", "torus", ["lattice", "mesh"]),
            ("c1", "mesh", ["lattice", "torus"]),
            ("g", "mesh", ["lattice", "torus"]),
            ("c2", "lattice", ["mesh", "torus"]),
        ] {
            let found = hits(s, branch, now, 10, &[]);
            assert_eq!(found.len(), 1, "{m} {branch} {now}");
            assert_eq!(found[0].id, r);
            assert!(found[0].text.contains(now));
            assert_eq!(*found[0].tags, tags(&["doc"]), "{m} {branch}");
            for word in gone {
                assert!(
                    ids(s, branch, word, 10, &[]).is_empty(),
                    "{m} {branch}: old or foreign version found by {word:?}"
                );
            }
            // A word of every version finds the record once.
            let wording = ids(s, branch, "wording about", 10, &[]);
            assert_eq!(sorted(wording), sorted(vec![r, keep]), "{m} {branch}");
            assert_eq!(ids(s, branch, "doc", 10, &[]), vec![r], "{m} {branch}");
        }
        vec![r, keep]
    });
}

#[test]
fn deleted_records_are_not_found() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 10, 4);
        let r1 = add(s, "root", "obsolete benchmark numbers here", &["bench"]);
        let r2 = add(s, "root", "valid benchmark numbers here", &["bench"]);
        s.fork("root", Some("c")).unwrap();
        s.archival_delete("c", r1).unwrap();
        s.fork("c", Some("g")).unwrap();
        let m = mode(s);
        assert_eq!(ids(s, "root", "benchmark", 10, &[]), vec![r2, r1], "{m}");
        for branch in ["c", "g"] {
            assert_eq!(ids(s, branch, "benchmark", 10, &[]), vec![r2], "{m}");
            assert!(ids(s, branch, "obsolete", 10, &[]).is_empty(), "{m}");
            assert_eq!(ids(s, branch, "", 10, &["bench"]), vec![r2], "{m}");
        }
        s.archival_delete("root", r2).unwrap();
        assert_eq!(ids(s, "root", "benchmark", 10, &[]), vec![r1], "{m}");
        assert_eq!(ids(s, "c", "benchmark", 10, &[]), vec![r2], "{m}");
        // Adding the same text again after deleting it makes a new, findable record.
        let again = add(s, "c", "obsolete benchmark numbers here", &["bench"]);
        assert_ne!(again, r1);
        assert_eq!(ids(s, "c", "obsolete", 10, &[]), vec![again], "{m}");
        vec![r1, r2, again]
    });
}

#[test]
fn siblings_and_late_parent_writes_are_never_found() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 10, 3);
        let base = add(s, "root", "shared base plan", &["ours"]);
        s.fork("root", Some("s1")).unwrap();
        s.fork("root", Some("s2")).unwrap();
        let p1 = add(s, "s1", "sibling one plan", &["mine"]);
        let p2 = add(s, "s2", "sibling two plan", &["mine"]);
        let late = add(s, "root", "root late plan", &["mine"]);
        s.fork("root", Some("s3")).unwrap();
        s.fork("s1", Some("s1a")).unwrap();
        let m = mode(s);
        let expect = [
            ("root", vec![late, base]),
            ("s1", vec![p1, base]),
            ("s1a", vec![p1, base]),
            ("s2", vec![p2, base]),
            ("s3", vec![late, base]),
        ];
        let mut all = Vec::new();
        for (branch, expected) in expect {
            assert_eq!(ids(s, branch, "plan", 10, &[]), expected, "{m} {branch}");
            assert_eq!(ids(s, branch, "plan", 10, &["mine"]), expected[..1].to_vec(), "{m} {branch}");
            assert!(ids(s, branch, "sibling late", 10, &[]).len() <= 1, "{m} {branch}");
            all.push(ids(s, branch, "one two late", 10, &[]));
        }
        assert_eq!(all, vec![vec![late], vec![p1], vec![p1], vec![p2], vec![late]], "{m}");
        all
    });
}

#[test]
fn any_tag_filters_the_same_way() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        let circled = add(s, "root", "tagged marker note", &["Ⓐ"]);
        let accented = add(s, "root", "another marker note", &["été", "kind:error"]);
        let newer = add(s, "root", "a third marker note", &["a\u{23F5}b"]);
        add(s, "root", "untagged marker note", &[]);
        let m = mode(s);
        assert_eq!(ids(s, "root", "note", 10, &["Ⓐ"]), vec![circled], "{m}");
        assert_eq!(ids(s, "root", "marker", 10, &["été", "kind:error"]), vec![accented], "{m}");
        assert_eq!(ids(s, "root", "note", 10, &["a\u{23F5}b"]), vec![newer], "{m}");
        assert!(ids(s, "root", "note", 10, &["été", "Ⓐ"]).is_empty(), "{m}");
    });
}

/// FTS5 narrows a tag filter by the tag's words, which other tags can hold too, in another
/// case, with other punctuation, inside a longer tag or across two tags: only whole, equal tags
/// pass (as stored, escapes included). A tag that is not ASCII is not narrowed by its words at
/// all: the check alone decides.
#[test]
fn a_tag_filter_takes_only_whole_equal_tags() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        let exact = add(s, "root", "probe note one", &["kind:error"]);
        let among_others = add(s, "root", "probe note two", &["kind-error", "kind:error", "x"]);
        for near in [
            &["kind-error"][..],
            &["Kind:Error"],
            &["a:kind", "error:b"],
            &["kind:error:x"],
            &["x kind:error"],
        ] {
            add(s, "root", "probe note near", near);
        }
        let quoted = add(s, "root", "probe note quoted", &["say \"kind:error\""]);
        let accented = add(s, "root", "probe note accented", &["été"]);
        add(s, "root", "probe note capital", &["Été"]);
        let secret = add(s, "root", "probe note secret", &["key sk-abcdefghijklmnop1234"]);
        let m = mode(s);
        assert_eq!(sorted(ids(s, "root", "probe", 20, &["kind:error"])), vec![exact, among_others], "{m}");
        assert_eq!(ids(s, "root", "probe", 20, &["say \"kind:error\""]), vec![quoted], "{m}");
        assert_eq!(ids(s, "root", "probe", 20, &["kind:error", "x"]), vec![among_others], "{m}");
        assert!(ids(s, "root", "probe", 20, &["kind"]).is_empty(), "{m}");
        assert_eq!(ids(s, "root", "probe", 20, &["été"]), vec![accented], "{m}");
        // Without words, the newest records carrying the tags, by the same test.
        assert_eq!(sorted(ids(s, "root", "", 20, &["kind:error"])), vec![exact, among_others], "{m}");
        assert_eq!(ids(s, "root", "", 20, &["say \"kind:error\""]), vec![quoted], "{m}");
        assert_eq!(ids(s, "root", "", 20, &["été"]), vec![accented], "{m}");
        assert!(ids(s, "root", "", 20, &["kind"]).is_empty(), "{m}");
        assert_eq!(ids(s, "root", "", 20, &["kind:error", "x"]), vec![among_others], "{m}");
        // A filter is taken as a write takes tags: trimmed, redacted, and never empty.
        assert_eq!(sorted(ids(s, "root", "probe", 20, &[" kind:error "])), vec![exact, among_others], "{m}");
        assert_eq!(ids(s, "root", "", 1, &["\tx"]), vec![among_others], "{m}");
        let found = hits(s, "root", "probe", 20, &["key sk-abcdefghijklmnop1234"]);
        assert_eq!(found.iter().map(|r| r.id).collect::<Vec<_>>(), vec![secret], "{m}");
        assert!(!found[0].tags[0].contains("abcdefghijklmnop1234"), "{m}: {:?}", found[0].tags);
        for bad in ["", "  ", "two\nlines"] {
            let search = Search { query: "probe".into(), k: 5, tags: tags(&[bad]) };
            let err = s.archival_search("root", &search).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{m}: {bad:?}");
        }
    });
}

#[test]
fn other_branches_records_never_move_a_ranking() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        add(s, "root", "cache tiling beat the baseline", &[]);
        add(s, "root", "cache misses dominate the gpu run", &["gpu"]);
        s.fork("root", Some("a")).unwrap();
        add(s, "a", "gpu offload with cache blocking", &[]);
        add(s, "a", "gpu kernel launch overhead", &["gpu"]);
        let ranking = |s: &Store| -> Vec<(i64, u64)> {
            let mut out = Vec::new();
            for (query, tags) in [("cache gpu", &[][..]), ("gpu", &[][..]), ("cache", &["gpu"][..])] {
                for r in hits(s, "a", query, 10, tags) {
                    out.push((r.id, r.score.unwrap().to_bits()));
                }
            }
            out
        };
        let before = ranking(s);
        // A sibling, the parent after the fork and a child write many records with the same
        // words: the view of `a` holds none of them, so not one score may change.
        s.fork("root", Some("sibling")).unwrap();
        s.fork("a", Some("child")).unwrap();
        for i in 0..30 {
            add(s, "sibling", &format!("cache cache gpu note {i}"), &["gpu"]);
            add(s, "root", &format!("gpu later root note {i}"), &[]);
            add(s, "child", &format!("cache child note {i}"), &["gpu"]);
        }
        assert_eq!(ranking(s), before, "{}", mode(s));
        before
    });
}

#[test]
fn special_characters_are_searched_as_words() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 20, 4);
        let version = add(s, "root", "release v1.2 shipped today", &[]);
        let path = add(s, "root", "see src/main.rs line 2", &[]);
        let gate = add(s, "root", "NOT gate AND NEAR OR", &[]);
        let quote = add(s, "root", "he said \"don't\" twice", &["it's-ok"]);
        let m = mode(s);
        // Punctuation in any form is a separator: all of these mean the words "v1" and "2".
        let plain = ids(s, "root", "v1 2", 10, &[]);
        assert_eq!(plain, vec![version, path], "{m}");
        for query in [
            "v1.2",
            "\"v1.2\"",
            "v1-2",
            "(v1 2)",
            "v1:2",
            "v1/2",
            "v1*2",
            "'v1' '2'",
            "v1, 2.",
            "-v1 -2",
            "v1 AND 2",
            "(v1 OR 2)",
            "v1^2",
            "{v1} [2]",
            "v1 + 2",
            "v1 \"2",
        ] {
            assert_eq!(ids(s, "root", query, 10, &[]), plain, "{m}: {query:?}");
        }
        assert_eq!(ids(s, "root", "src/main.rs", 10, &[]), vec![path], "{m}");
        for query in ["NOT", "AND", "OR", "NEAR", "not AND or", "NEAR(", "AND:"] {
            assert_eq!(ids(s, "root", query, 10, &[]), vec![gate], "{m}: {query:?}");
        }
        assert_eq!(ids(s, "root", "don't", 10, &[]), vec![quote], "{m}");
        assert_eq!(ids(s, "root", "\"don", 10, &[]), vec![quote], "{m}");
        assert_eq!(ids(s, "root", "ok", 10, &[]), vec![quote], "{m}");
        for query in [".", "\"", "'", "-", ":", "/", "(", ")", "*", "\"\"", "()", "-:-"] {
            assert!(ids(s, "root", query, 10, &[]).is_empty(), "{m}: {query:?}");
        }
        vec![version, path, gate, quote]
    });
}

#[test]
fn non_ascii_text_is_found_the_same_way() {
    in_both_modes(|s| {
        s.create_root("root").unwrap();
        filler(s, "root", 20, 4);
        let tokyo = add(s, "root", "東京の天気は晴れ。明日は雨", &[]);
        let osaka = add(s, "root", "大阪 の 実験 結果", &["実験"]);
        let cafe = add(s, "root", "Café crème brûlée recipe", &[]);
        let naive = add(s, "root", "naïve Ångström résumé", &["données"]);
        let munich = add(s, "root", "Straße über München", &[]);
        let russian = add(s, "root", "Привет мир эксперимент", &[]);
        let m = mode(s);
        let cases: Vec<(&str, Vec<i64>)> = vec![
            ("東京の天気は晴れ", vec![tokyo]),
            ("明日は雨", vec![tokyo]),
            ("実験", vec![osaka]),
            ("結果 の", vec![osaka]),
            ("café", vec![cafe]),
            ("CAFÉ", vec![cafe]),
            ("Crème", vec![cafe]),
            ("BRÛLÉE", vec![cafe]),
            ("ångström", vec![naive]),
            ("ÅNGSTRÖM", vec![naive]),
            ("RÉSUMÉ naïve", vec![naive]),
            ("données", vec![naive]),
            ("münchen", vec![munich]),
            ("ÜBER", vec![munich]),
            ("straße", vec![munich]),
            ("ПРИВЕТ", vec![russian]),
            ("эксперимент", vec![russian]),
            // Neither mode segments CJK runs or ignores diacritics.
            ("東京", vec![]),
            ("cafe", vec![]),
            ("resume", vec![]),
        ];
        let mut out = Vec::new();
        for (query, expected) in cases {
            let got = ids(s, "root", query, 10, &[]);
            assert_eq!(got, expected, "{m}: {query:?}");
            out.push(got);
        }
        assert_eq!(ids(s, "root", "", 10, &["実験"]), vec![osaka], "{m}");
        out
    });
}

/// Text in decomposed form (NFD, as macOS produces) and the Turkish dotted capital I. Minimal
/// repro of a disagreement between the modes: see the assertion messages.
#[test]
fn decomposed_accents_and_dotted_capital_i_are_found_the_same_way() {
    let results = in_both_modes(|s| {
        s.create_root("root").unwrap();
        let nfd = add(s, "root", "cafe\u{301} noir", &[]);
        let istanbul = add(s, "root", "İstanbul trip", &[]);
        vec![
            (nfd, ids(s, "root", "cafe\u{301}", 10, &[])),
            (istanbul, ids(s, "root", "İstanbul", 10, &[])),
            (nfd, ids(s, "root", "cafe", 10, &[])),
        ]
    });
    // Each record is found by its own word.
    assert_eq!(results[0].1, vec![results[0].0]);
    assert_eq!(results[1].1, vec![results[1].0]);
}

/// A small deterministic generator (no dependency, same sequence on every platform).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const VOCAB: &[&str] = &[
    "gpu",
    "cache",
    "stencil",
    "mpi",
    "loss",
    "plot",
    "kernel",
    "fusion",
    "tensor",
    "lattice",
    "halo",
    "exchange",
    "roofline",
    "bandwidth",
    "latency",
    "sweep",
    "ablation",
    "baseline",
    "divergence",
    "warmup",
    "scheduler",
    "optimizer",
    "gradient",
    "memory",
    "throughput",
    "pipeline",
    "shard",
    "replica",
    "checkpoint",
    "dataset",
    "vector",
    "matrix",
    "sparse",
    "dense",
    "fp16",
    "bf16",
    "int8",
    "quantize",
    "prune",
    "distill",
];
const STOPS: &[&str] = &["the", "of", "and", "with", "to", "is"];
const TAGS: &[&str] = &["gpu", "bench", "negative", "idea", "result"];
const PUNCT: &[&str] = &[" ", " ", " ", ", ", ". ", ": ", " - ", "/", " (", ") ", "'", "\""];

fn random_text(rng: &mut Lcg) -> String {
    let n = 2 + rng.below(7);
    let mut text = String::new();
    for i in 0..n {
        if i > 0 {
            text.push_str(rng.pick(PUNCT));
        }
        if rng.below(5) == 0 {
            text.push_str(rng.pick(STOPS));
        } else {
            let word = rng.pick(VOCAB);
            if rng.below(4) == 0 {
                text.push_str(&word.to_uppercase());
            } else {
                text.push_str(word);
            }
        }
    }
    text
}

fn random_tags(rng: &mut Lcg) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for _ in 0..rng.below(3) {
        let tag = rng.pick(TAGS).to_string();
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    out
}

fn words_of(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// The records a query must find, computed from the branch's listed view: those carrying every
/// tag and containing any query word (stop words dropped unless nothing else is left).
fn oracle(s: &Store, branch: &str, query: &str, with_tags: &[String]) -> Vec<i64> {
    let all: Vec<String> = words_of(query).into_iter().collect();
    let content: Vec<String> = all.iter().filter(|w| !STOPS.contains(&w.as_str())).cloned().collect();
    let wanted = if content.is_empty() { all } else { content };
    let mut out: Vec<i64> = s
        .archival_list(branch, None)
        .unwrap()
        .into_iter()
        .filter(|r| with_tags.iter().all(|t| r.tags.contains(t)))
        .filter(|r| {
            let mut have = words_of(&r.text);
            for tag in r.tags.iter() {
                have.extend(words_of(tag));
            }
            wanted.iter().any(|w| have.contains(w))
        })
        .map(|r| r.id)
        .collect();
    out.sort();
    out
}

#[test]
fn random_corpus_gives_the_same_ranking_in_both_modes() {
    let answers = in_both_modes(|s| {
        let mut rng = Lcg(0x5eed_cafe);
        s.create_root("root").unwrap();
        fn write_some(s: &Store, rng: &mut Lcg, branch: &str, n: usize) {
            for _ in 0..n {
                let roll = rng.below(10);
                let visible: Vec<i64> = s.archival_list(branch, None).unwrap().iter().map(|r| r.id).collect();
                if roll < 7 || visible.is_empty() {
                    s.archival_add(branch, &random_text(rng), &random_tags(rng)).unwrap();
                } else if roll < 9 {
                    let id = visible[rng.below(visible.len())];
                    let text = random_text(rng);
                    let new_tags = random_tags(rng);
                    match rng.below(3) {
                        0 => s.archival_update(branch, id, Some(&text), None),
                        1 => s.archival_update(branch, id, None, Some(&new_tags)),
                        _ => s.archival_update(branch, id, Some(&text), Some(&new_tags)),
                    }
                    .unwrap();
                } else {
                    let id = visible[rng.below(visible.len())];
                    s.archival_delete(branch, id).unwrap();
                }
            }
        }
        write_some(s, &mut rng, "root", 80);
        s.fork("root", Some("a")).unwrap();
        write_some(s, &mut rng, "root", 40);
        write_some(s, &mut rng, "a", 40);
        s.fork("root", Some("b")).unwrap();
        s.fork("a", Some("a1")).unwrap();
        write_some(s, &mut rng, "a", 20);
        write_some(s, &mut rng, "a1", 40);
        write_some(s, &mut rng, "b", 40);
        write_some(s, &mut rng, "root", 20);

        let mut answers = Vec::new();
        let mut qrng = Lcg(42);
        for q in 0..80 {
            let n = 1 + qrng.below(3);
            let mut parts: Vec<String> = (0..n)
                .map(|_| {
                    if qrng.below(6) == 0 {
                        qrng.pick(STOPS).to_string()
                    } else {
                        qrng.pick(VOCAB).to_string()
                    }
                })
                .collect();
            if q % 7 == 0 {
                parts.push("zzz-unknown".into());
            }
            let query = parts.join(qrng.pick(PUNCT));
            let with_tags: Vec<String> = match qrng.below(4) {
                0 => vec![qrng.pick(TAGS).to_string()],
                1 => random_tags(&mut qrng),
                _ => vec![],
            };
            let tag_refs: Vec<&str> = with_tags.iter().map(String::as_str).collect();
            for branch in ["root", "a", "a1", "b"] {
                let all = sorted(ids(s, branch, &query, 10_000, &tag_refs));
                let expected = oracle(s, branch, &query, &with_tags);
                assert_eq!(all, expected, "{}: {branch} {query:?} {with_tags:?}", mode(s));
                // A small k returns as many as it can, all of them matches.
                let top = ids(s, branch, &query, 3, &tag_refs);
                assert_eq!(top.len(), all.len().min(3));
                assert!(top.iter().all(|id| all.contains(id)));
                // Compared across the two modes by in_both_modes: order and exact scores.
                let ranked: Vec<(i64, u64)> = hits(s, branch, &query, 10_000, &tag_refs)
                    .iter()
                    .map(|r| (r.id, r.score.unwrap_or(f64::NAN).to_bits()))
                    .collect();
                answers.push((branch, query.clone(), with_tags.clone(), all, ranked));
            }
        }
        answers
    });
    // The corpus exercised both empty and large answers.
    assert!(answers.iter().any(|a| a.3.is_empty()));
    assert!(answers.iter().any(|a| a.3.len() >= 10));
}

#[test]
fn recall_search_covers_the_whole_visible_timeline_with_the_same_semantics() {
    in_both_modes(|s| {
        assert_eq!(s.config().recall_max_events, 20);
        s.create_root("root").unwrap();
        let first = s.recall_append("root", "error", "warmup diverged at step 10", &[]).unwrap().id;
        let mut steps = Vec::new();
        for i in 0..39 {
            steps.push(s.recall_append("root", "note", &format!("routine step {i} done"), &[]).unwrap().id);
        }
        let tagged =
            s.recall_append("root", "result", "final metric recorded", &tags(&["warmup-free"])).unwrap().id;
        s.fork("root", Some("c")).unwrap();
        s.fork("root", Some("sib")).unwrap();
        let late = s.recall_append("root", "error", "warmup diverged again late", &[]).unwrap().id;
        let sib = s.recall_append("sib", "error", "warmup diverged in sibling", &[]).unwrap().id;
        let own = s.recall_append("c", "note", "warmup retried with lower lr", &[]).unwrap().id;
        let m = mode(s);
        let ev = |branch: &str, query: &str, k: usize| -> Vec<i64> {
            s.recall_search(branch, query, k)
                .unwrap_or_else(|e| panic!("{m}: {query:?}: {e}"))
                .iter()
                .map(|e| e.id)
                .collect()
        };
        // The oldest event is far outside the recall window, and still found.
        let window = s.recall_list("c", Some(20)).unwrap().events;
        assert!(!window.iter().any(|e| e.id == first));
        assert_eq!(ev("c", "diverged", 10), vec![first], "{m}");
        // Words OR-ed; more matched words first; ties newest first (tags count as words).
        assert_eq!(ev("c", "warmup diverged", 10), vec![first, own, tagged], "{m}");
        assert_eq!(ev("c", "warmup", 10), vec![own, tagged, first], "{m}");
        assert_eq!(ev("c", "warmup", 2), vec![own, tagged], "{m}");
        // Stop words dropped; punctuation is a separator, never syntax.
        assert_eq!(ev("c", "the diverged of it", 10), vec![first], "{m}");
        for query in ["diverged:", "(diverged", "\"diverged", "-diverged", "diverged*", "NEAR(diverged)"] {
            assert_eq!(ev("c", query, 10), vec![first], "{m}: {query:?}");
        }
        assert!(ev("c", ".,:'\"", 10).is_empty(), "{m}");
        assert_eq!(ev("c", "step 7", 10)[0], steps[7], "{m}");
        assert_eq!(ev("c", "routine", 100).len(), 39, "{m}");
        // An empty query lists newest first.
        assert_eq!(ev("c", "", 3), vec![own, tagged, steps[38]], "{m}");
        // Late parent writes and siblings' events are not in the view.
        assert!(!ev("c", "again sibling", 100).contains(&late), "{m}");
        assert!(!ev("c", "again sibling", 100).contains(&sib), "{m}");
        assert_eq!(ev("sib", "diverged", 10), vec![sib, first], "{m}");
        assert_eq!(ev("root", "diverged", 10), vec![late, first], "{m}");
        // Excluded events are not found.
        s.recall_exclude("c", &[first]).unwrap();
        assert!(ev("c", "diverged", 10).is_empty(), "{m}");
        assert_eq!(ev("root", "diverged", 10), vec![late, first], "{m}");
        (first, own, tagged, late, sib)
    });
}

/// A store on a file in a new directory (kept while it lives), its FTS5 index taking new
/// records `batch` at a time, and a second connection to look at its tables.
fn on_file_indexing_by(batch: u32) -> (tempfile::TempDir, Store, rusqlite::Connection) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("memory.sqlite");
    let mut config = Config::default();
    config.search.fts_batch = std::num::NonZeroU32::new(batch).unwrap();
    let store = Store::open(&file, config, Clock::Fixed(T0)).unwrap();
    let observer = rusqlite::Connection::open(&file).unwrap();
    (dir, store, observer)
}

/// The FTS5 index takes records a batch at a time; gc removes from it only what it holds.
/// After a collection of records on both sides of its end, the next batch leaves an index that
/// matches the table (FTS5's own check), and every write and search goes on.
#[test]
fn gc_removes_from_the_index_only_what_it_holds() {
    let (_dir, s, observer) = on_file_indexing_by(4);
    s.create_root("root").unwrap();
    s.fork("root", Some("doomed")).unwrap();
    for i in 0..6 {
        add(&s, "doomed", &format!("mpi doomed {i}"), &[]);
    }
    let indexed_until: i64 = observer
        .query_row("SELECT value FROM meta WHERE key = 'fts_indexed_until'", [], |r| r.get(0))
        .unwrap();
    let waiting: i64 = observer
        .query_row("SELECT count(*) FROM archival WHERE seq > ?1", [indexed_until], |r| r.get(0))
        .unwrap();
    assert!(indexed_until > 0 && waiting == 2, "four indexed, two past the index");
    s.gc(&GcRequest { branches: vec!["doomed".into()], ..Default::default() }).unwrap();
    for i in 0..4 {
        add(&s, "root", &format!("mpi kept {i}"), &[]);
    }
    observer.execute("INSERT INTO archival_fts(archival_fts) VALUES ('integrity-check')", []).unwrap();
    assert_eq!(ids(&s, "root", "mpi", 10, &[]).len(), 4);
}

/// Per collected branch, its bid and how many entries the FTS5 index still holds for it (0 when
/// `gc` removed them all).
pub(crate) fn index_entries_of_collected_branches(file: &rusqlite::Connection) -> Vec<(i64, i64)> {
    let mut collected = file.prepare("SELECT bid FROM branches WHERE collected_at IS NOT NULL").unwrap();
    let bids: Vec<i64> = collected.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    bids.into_iter()
        .map(|bid| {
            let entries = file
                .query_row(
                    "SELECT count(*) FROM archival_fts WHERE archival_fts MATCH ?1",
                    [format!("branch : \"{bid}\"")],
                    |r| r.get(0),
                )
                .unwrap();
            (bid, entries)
        })
        .collect()
}

/// A collection of many branches removes all their index entries at once: afterwards the index
/// holds no entry of a collected branch and matches the table (FTS5's check against the
/// content, with rank 1), the survivors' searches find what they found before, and the index
/// goes on taking records.
#[test]
fn gc_of_many_branches_removes_their_index_entries() {
    let (_dir, s, observer) = on_file_indexing_by(4);
    s.create_root("root").unwrap();
    add(&s, "root", "mpi root", &[]);
    s.fork("root", Some("kept")).unwrap();
    add(&s, "kept", "mpi kept", &[]);
    for b in 0..3 {
        let doomed = format!("doomed-{b}");
        s.fork("root", Some(&doomed)).unwrap();
        s.fork(&doomed, Some(&format!("{doomed}-child"))).unwrap();
        for i in 0..5 {
            add(&s, &doomed, &format!("mpi {doomed} {i}"), &[]);
            add(&s, &format!("{doomed}-child"), &format!("mpi {doomed} child {i}"), &[]);
        }
    }
    // 33 records, taken 4 at a time: the newest, a collected one, is past the index's end.
    add(&s, "doomed-2-child", "mpi doomed-2 child last", &[]);
    let before = ids(&s, "kept", "mpi", 10, &[]);
    let request = GcRequest {
        branches: vec!["doomed-0".into(), "doomed-1".into(), "doomed-2".into()],
        subtree: true,
        ..Default::default()
    };
    let report = s.gc(&request).unwrap();
    assert_eq!(report.collected.len(), 6);
    assert_eq!(report.rows.archival, 31);
    let collected = index_entries_of_collected_branches(&observer);
    assert_eq!(collected.len(), 6);
    for (bid, entries) in collected {
        assert_eq!(entries, 0, "branch {bid} collected, its entries gone");
    }
    // Nothing is past the index's end and no version is a delete: the whole check applies.
    observer
        .execute("INSERT INTO archival_fts(archival_fts, rank) VALUES ('integrity-check', 1)", [])
        .unwrap();
    assert_eq!(ids(&s, "kept", "mpi", 10, &[]), before);
    assert_eq!(ids(&s, "root", "mpi", 10, &[]).len(), 1);
    for i in 0..4 {
        add(&s, "kept", &format!("mpi later {i}"), &[]);
    }
    observer
        .execute("INSERT INTO archival_fts(archival_fts, rank) VALUES ('integrity-check', 1)", [])
        .unwrap();
    assert_eq!(ids(&s, "kept", "mpi", 10, &[]).len(), 6);
}

/// `archival_lengths`, from which a search reads each match's branch and length, holds the
/// versions the FTS5 index holds: written with each of its batches, removed with a version (the
/// model test holds it to every write and collection).
#[test]
fn archival_lengths_follow_the_index() {
    let (_dir, s, observer) = on_file_indexing_by(2);
    s.create_root("a").unwrap();
    let rows = |sql: &str| -> Vec<(i64, i64, i64)> {
        let mut statement = observer.prepare(sql).unwrap();
        let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let lengths = || rows("SELECT seq, branch, tokens FROM archival_lengths ORDER BY seq");
    let versions = |seqs: &[i64]| {
        let list = seqs.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        rows(&format!("SELECT seq, branch, tokens FROM archival WHERE seq IN ({list}) ORDER BY seq"))
    };
    let first = add(&s, "a", "one two", &[]);
    assert_eq!(lengths(), vec![], "a version past the index's end has none");
    let second = add(&s, "a", "three four five", &[]);
    assert_eq!(lengths(), versions(&[first, second]), "the batch's versions");
    s.archival_delete("a", first).unwrap();
    let third = add(&s, "a", "six", &[]);
    assert_eq!(lengths(), versions(&[first, second, third]), "none for a delete, which has no text");
    observer.execute("DELETE FROM archival WHERE seq = ?1", [second]).unwrap();
    assert_eq!(lengths(), versions(&[first, third]), "removed with its version");
}
