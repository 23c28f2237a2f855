//! The LLM protocol in the engine (SPEC §4.7): what the end-to-end tests cannot see directly.

use memctl_core::*;

fn store() -> Store {
    let s = Store::open_in_memory(Config::default(), Clock::Fixed(1_767_323_045.0)).unwrap();
    s.create_root("r").unwrap();
    s.recall_append("r", "note", "tried tiling", &[]).unwrap();
    s
}

#[test]
fn a_skipped_operation_does_not_hide_the_view_from_the_next() {
    // The failing operation is the first to read the view; its rollback must not leave the
    // following reads with an empty path.
    let s = store();
    let block = r#"{"archival_update": [{"id": 999, "text": "x"}], "recall_search": "tiling"}"#;
    let outcome = s.apply_update("r", block, true).unwrap();
    assert_eq!(outcome.skipped.len(), 1);
    assert_eq!(outcome.results["recall_search"].as_array().unwrap().len(), 1);
}

#[test]
fn strict_failure_leaves_nothing_behind() {
    let s = store();
    let ops_before = s.ops(None, None).unwrap().len();
    let block = r#"{"core": {"k": "v"}, "archival": ["note"], "recall_evict": {"ids": [424242]}}"#;
    let err = s.apply_update("r", block, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.message().contains("recall_evict"), "{}", err.message());
    assert!(s.core("r").unwrap().is_empty());
    assert!(s.archival_list("r", None).unwrap().is_empty());
    assert_eq!(s.ops(None, None).unwrap().len(), ops_before);
}

#[test]
fn llm_defaults_and_results_block() {
    let s = store();
    let block = r#"<memory_update>{"core": {"k": {"value": "v", "importance": 9}}, "archival": [{"text": "t", "tags": ["a b"]}],
        "core_get": ["k", "missing"], "archival_search": {"query": "t"}}</memory_update>"#;
    let outcome = s.apply_update("r", block, false).unwrap();
    assert!(!outcome.read_only);
    let core = s.core("r").unwrap();
    assert_eq!((core[0].value.as_str(), core[0].importance), ("v", 5), "importance clamped to 5");
    let record = &s.archival_list("r", None).unwrap()[0];
    assert_eq!(*record.tags, vec![LLM_TAG.to_string(), "a b".to_string()]);
    assert_eq!(
        outcome.results_block(),
        "<memory_results>\n**Core Memory Values:**\n- k: v\n- missing: (not found)\n\n\
         **Archival Search Results:**\n[1] t\nTags: LLM_INSIGHT, a b\n</memory_results>"
    );
    let read = s.apply_update("r", r#"{"core_get": "k"}"#, false).unwrap();
    assert!(read.read_only);
}
