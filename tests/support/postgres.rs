//! A throwaway PostgreSQL cluster: `initdb` and `pg_ctl` on a temporary directory, reached only
//! through a Unix socket in that directory (no TCP port), stopped when dropped. PostgreSQL
//! refuses to run as root, so under root the server runs as `nobody`, owner of the directory.
//!
//! The server binaries are looked for on PATH, then in Debian's `/usr/lib/postgresql/*/bin`.
//! Without them a test prints a notice and passes, unless `CI` is set: then it fails, so CI
//! never skips PostgreSQL silently (`.ci/run` installs the distribution's `postgresql`).
//!
//! [`pooler`]: a PgBouncer in front of such a cluster.

#[path = "pooler.rs"]
pub mod pooler;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The cluster's superuser, trusted on the socket.
const USER: &str = "memctl";

pub struct Cluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// Who runs the server: None for the current user, else a user `runuser` switches to.
    run_as: Option<&'static str>,
}

impl Cluster {
    /// A started cluster, or None with a notice when the server binaries are missing (a
    /// failure under CI).
    pub fn start_or_skip(test: &str) -> Option<Cluster> {
        Cluster::start(test, false)
    }

    /// [`Cluster::start_or_skip`] with every commit flushed to disk, as a server in use runs
    /// (the tests' clusters skip it: `fsync=off`).
    pub fn start_durable_or_skip(test: &str) -> Option<Cluster> {
        Cluster::start(test, true)
    }

    fn start(test: &str, durable: bool) -> Option<Cluster> {
        let Some(bin) = server_binaries() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "no PostgreSQL server (initdb, pg_ctl): CI must run {test}"
            );
            eprintln!(
                "NOTICE: {test} skipped: no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in \
                 /usr/lib/postgresql/*/bin. Install them (e.g. apt-get install postgresql); CI=1 makes \
                 this a failure."
            );
            return None;
        };
        let dir = tempfile::Builder::new().prefix("memctl-pg-").tempdir().expect("a temporary directory");
        let run_as = is_root().then_some("nobody");
        if let Some(user) = run_as {
            let owner = Command::new("id").args(["-u", user]).output().expect("id");
            let uid: u32 = String::from_utf8_lossy(&owner.stdout).trim().parse().expect("a uid");
            std::os::unix::fs::chown(dir.path(), Some(uid), None).expect("chown the cluster directory");
        }
        let cluster = Cluster { dir, bin, run_as };
        let data = cluster.data_dir();
        cluster.server_tool(
            "initdb",
            &["-D", &data, "-U", USER, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions"],
        );
        let socket = cluster.socket_dir();
        let fsync = if durable { "on" } else { "off" };
        let options = format!("-k {socket} -c listen_addresses= -c fsync={fsync} -c max_connections=200");
        let log = cluster.dir.path().join("server.log").display().to_string();
        cluster.server_tool("pg_ctl", &["-D", &data, "-l", &log, "-o", &options, "-w", "start"]);
        Some(cluster)
    }

    /// The cluster this test process shares (started on first use), or None with a notice when
    /// the server binaries are missing (a failure under CI). It outlives the tests: a watchdog
    /// stops it and removes its directory once the test process has exited.
    pub fn shared(test: &str) -> Option<&'static Cluster> {
        static SHARED: OnceLock<Option<Cluster>> = OnceLock::new();
        let cluster = SHARED.get_or_init(|| {
            let cluster = Cluster::start_or_skip("the PostgreSQL tests")?;
            cluster.watch(std::process::id());
            Some(cluster)
        });
        if cluster.is_none() {
            eprintln!("NOTICE: {test} runs on SQLite only (no PostgreSQL server)");
        }
        cluster.as_ref()
    }

    /// A new, empty database on this cluster; its URL.
    pub fn new_database(&self) -> String {
        self.create_database("")
    }

    /// [`Cluster::new_database`] in `encoding` (`SQL_ASCII`, say: what a server under the C
    /// locale gives), whatever the cluster's.
    pub fn new_database_in(&self, encoding: &str) -> String {
        self.create_database(&format!(
            " ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ))
    }

    fn create_database(&self, options: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("run_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        self.psql("postgres", &format!("CREATE DATABASE {name}{options}"));
        self.url(&name)
    }

    /// Starts a process that stops the server and removes its directory when process `pid`
    /// has gone (a static is never dropped).
    fn watch(&self, pid: u32) {
        let data = self.data_dir();
        let pg_ctl = self.bin.join("pg_ctl").display().to_string();
        let stop = match self.run_as {
            Some(user) => format!("runuser -u {user} -- {pg_ctl}"),
            None => pg_ctl,
        };
        let dir = self.dir.path().display().to_string();
        // The shell starts the watchdog in the background and returns at once.
        let script = format!(
            "(while kill -0 {pid} 2>/dev/null; do sleep 0.2; done; \
              {stop} -D '{data}' -m immediate -w stop; rm -rf '{dir}') >/dev/null 2>&1 &"
        );
        start_watchdog("the cluster's watchdog", &script, &[]);
    }

    /// The server's log.
    pub fn log_file(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The directory of the server's socket (the cluster's own directory).
    pub fn socket_dir(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// A libpq URL for `database` on this cluster, through its socket.
    pub fn url(&self, database: &str) -> String {
        socket_url(self.dir.path(), database, "")
    }

    /// Runs `sql` with `psql` on database `database`; its output, unaligned and without headers.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let output = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                &self.socket_dir(),
                "-U",
                USER,
                "-d",
                database,
            ])
            .args(["-c", sql])
            .output()
            .expect("psql runs");
        assert!(output.status.success(), "psql {sql:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    fn data_dir(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// A server tool, run as the server's user.
    fn server_command(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        match self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&program);
                command
            }
            None => Command::new(&program),
        }
    }

    /// Runs a server tool as the server's user; it must succeed.
    fn server_tool(&self, tool: &str, args: &[&str]) -> Output {
        let output = self
            .server_command(tool)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("a server tool runs");
        assert!(
            output.status.success(),
            "{tool} {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data_dir();
        let _ = self.server_command("pg_ctl").args(["-D", &data, "-m", "immediate", "-w", "stop"]).output();
    }
}

/// Every row of every table of memctl's schema at `url`, each table's rows sorted, plus the
/// schema's version: [`super::dump`] for PostgreSQL.
pub fn dump(url: &str) -> Vec<(String, Vec<String>)> {
    let mut client = url.parse::<::postgres::Config>().unwrap().connect(::postgres::NoTls).unwrap();
    let version: i64 = client.query_one("SELECT max(version) FROM memctl.migrations", &[]).unwrap().get(0);
    let mut out = vec![("version".to_string(), vec![version.to_string()])];
    let tables = client
        .query("SELECT tablename::text FROM pg_tables WHERE schemaname = 'memctl' ORDER BY 1", &[])
        .unwrap();
    for table in tables.iter().map(|r| r.get::<_, String>(0)) {
        let sql = format!("SELECT t::text FROM memctl.{table} t");
        let mut rows: Vec<String> = client.query(&sql, &[]).unwrap().iter().map(|r| r.get(0)).collect();
        rows.sort();
        out.push((table, rows));
    }
    out
}

/// The first column, as text, of the rows of `sql` on memctl's schema at `url`.
pub fn texts(url: &str, sql: &str) -> Vec<String> {
    let mut client = url.parse::<::postgres::Config>().unwrap().connect(::postgres::NoTls).unwrap();
    client.batch_execute("SET search_path TO memctl").unwrap();
    client.query(sql, &[]).unwrap().iter().map(|r| r.get(0)).collect()
}

/// A libpq URL for `database` through the socket in directory `dir`, then `more` parameters.
fn socket_url(dir: &Path, database: &str, more: &str) -> String {
    let host = dir.display().to_string().replace('/', "%2F");
    format!("postgresql://{USER}@/{database}?host={host}{more}")
}

/// The database name of a cluster URL (`postgresql://user@/NAME?host=…`).
pub fn database_of(url: &str) -> &str {
    let tail = url.rsplit_once('/').map_or(url, |(_, tail)| tail);
    tail.split('?').next().unwrap_or(tail)
}

/// Runs `script` with `sh` (`args` as `$1`, `$2`, …): it starts a watchdog in the background
/// and returns at once.
fn start_watchdog(what: &str, script: &str, args: &[&std::ffi::OsStr]) {
    let started = Command::new("sh")
        .args(["-c", script, "sh"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{what} starts: {e}"));
    assert!(started.success(), "{what} starts");
}

/// The directory holding `initdb`, `pg_ctl` and `psql`.
fn server_binaries() -> Option<PathBuf> {
    let has_tools = |dir: &Path| ["initdb", "pg_ctl", "psql"].iter().all(|t| dir.join(t).is_file());
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    debian.sort();
    debian.reverse(); // the newest version first
    on_path.into_iter().chain(debian).find(|dir| has_tools(dir)).map(|dir| {
        // A PATH entry may hold symlinks into the version's directory, which has every tool.
        std::fs::canonicalize(dir.join("initdb"))
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or(dir)
    })
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
