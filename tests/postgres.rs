//! PostgreSQL, against a real server (support/postgres.rs). This build opens SQLite files only:
//! a PostgreSQL URL, by `--db` or `MEMCTL_DB`, is refused with exit 6 before anything is
//! created, on disk or in the database.

use crate::support::postgres::Cluster;
use crate::support::*;

#[test]
fn a_postgres_url_is_refused_and_nothing_is_created() {
    let Some(cluster) = Cluster::start_or_skip("the PostgreSQL test") else { return };
    assert_eq!(cluster.psql("postgres", "SELECT 1"), "1", "the server answers");
    let sb = Sandbox::new();
    let url = cluster.url("postgres");
    for args in [vec!["--db", url.as_str(), "init"], vec!["--db", url.as_str(), "branch", "list"]] {
        let outcome = sb.run(&[&["--json"][..], &args[..]].concat());
        let message = outcome.json_error(6, "incompatible_db");
        assert!(message.contains("PostgreSQL URL") && !message.contains(&cluster.socket_dir()), "{message}");
    }
    sb.run_env(&["core", "set", "root", "k", "v"], &[("MEMCTL_DB", url.as_str())]).text_error(6);
    let entries: Vec<_> = std::fs::read_dir(sb.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(entries, ["memctl.toml"], "no file or directory made of the URL");
    let tables =
        "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')";
    assert_eq!(cluster.psql("postgres", tables), "0", "nothing written to the server");
}
