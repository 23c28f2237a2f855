//! A throwaway PgBouncer in front of a test cluster (postgres.rs, whose submodule it is): its
//! own temporary directory, reached only through a Unix socket there, stopped when dropped.
//! Like the server, PgBouncer refuses to run as root: under root it runs as `nobody`.
//!
//! `pgbouncer` is looked for on PATH, then in `/usr/sbin` (Debian's package). Without it a test
//! prints a notice and passes, unless `CI` is set: then it fails (`.ci/run` installs the
//! distribution's `pgbouncer`).

use super::{database_of, is_root, socket_url, start_watchdog, Cluster};
use std::path::PathBuf;
use std::process::Command;

/// The port in the socket's name (no TCP port is opened).
const PORT: u16 = 6432;

/// How the pooler shares the server's sessions among its clients.
#[derive(Debug, Clone, Copy)]
pub enum PoolMode {
    /// A client holds a server session from connecting to disconnecting (PgBouncer's default).
    Session,
    /// A client holds a server session for a transaction; its next may get another.
    Transaction,
}

pub struct Pooler {
    dir: tempfile::TempDir,
}

impl Pooler {
    /// A started pooler in front of `cluster`, with at most `sessions` server sessions per
    /// database, or None with a notice when `pgbouncer` is missing (a failure under CI).
    pub fn start_or_skip(test: &str, cluster: &Cluster, mode: PoolMode, sessions: usize) -> Option<Pooler> {
        let Some(program) = pgbouncer() else {
            assert!(std::env::var_os("CI").is_none(), "no pgbouncer: CI must run {test}");
            eprintln!(
                "NOTICE: {test} skipped: no pgbouncer on PATH or in /usr/sbin. Install it (e.g. \
                 apt-get install pgbouncer); CI=1 makes this a failure."
            );
            return None;
        };
        let dir =
            tempfile::Builder::new().prefix("memctl-pgbouncer-").tempdir().expect("a temporary directory");
        let at = |name: &str| dir.path().join(name).display().to_string();
        let mode = match mode {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        };
        // Trusted on its socket, as the server is; every database of the cluster, by name.
        let ini = format!(
            "[databases]\n* = host={server}\n\n[pgbouncer]\nlisten_addr =\nlisten_port = {PORT}\n\
             unix_socket_dir = {socket}\nauth_type = trust\nauth_file = {users}\npool_mode = {mode}\n\
             default_pool_size = {sessions}\nmax_client_conn = 200\nlogfile = {log}\npidfile = {pid}\n",
            server = cluster.socket_dir(),
            socket = dir.path().display(),
            users = at("users.txt"),
            log = at("pgbouncer.log"),
            pid = at("pgbouncer.pid"),
        );
        std::fs::write(at("pgbouncer.ini"), ini).expect("the pooler's configuration");
        std::fs::write(at("users.txt"), "\"memctl\" \"\"\n").expect("the pooler's users");
        let mut command = if is_root() {
            let owner = Command::new("id").args(["-u", "nobody"]).output().expect("id");
            let uid: u32 = String::from_utf8_lossy(&owner.stdout).trim().parse().expect("a uid");
            for entry in ["", "pgbouncer.ini", "users.txt"] {
                std::os::unix::fs::chown(dir.path().join(entry), Some(uid), None).expect("chown");
            }
            let mut command = Command::new("runuser");
            command.args(["-u", "nobody", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        // `-d`: it returns once it listens, its pid in the pidfile.
        let output = command.args(["-d", &at("pgbouncer.ini")]).output().expect("pgbouncer runs");
        assert!(
            output.status.success(),
            "pgbouncer: {}{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(at("pgbouncer.log")).unwrap_or_default()
        );
        let pooler = Pooler { dir };
        pooler.watch(std::process::id());
        Some(pooler)
    }

    /// The URL, through the pooler, of the database of the cluster at `url` (as
    /// [`Cluster::url`] writes it).
    pub fn in_front_of(&self, url: &str) -> String {
        socket_url(self.dir.path(), database_of(url), &format!("&port={PORT}"))
    }

    fn pid(&self) -> Option<String> {
        let pid = std::fs::read_to_string(self.dir.path().join("pgbouncer.pid")).ok()?;
        Some(pid.trim().to_string())
    }

    /// Starts a process that stops the pooler and removes its directory if process `pid` (the
    /// tests) goes without dropping it (killed, timed out): the daemon outlives its parent. It
    /// kills only a process that is still PgBouncer (a pid can be reused).
    fn watch(&self, pid: u32) {
        let script = r#"(while kill -0 "$1" && [ -d "$2" ]; do sleep 0.2; done
              p=$(cat "$2/pgbouncer.pid")
              [ "$(cat "/proc/$p/comm")" = pgbouncer ] && kill -9 "$p"
              rm -rf "$2") >/dev/null 2>&1 &"#;
        let pid = pid.to_string();
        start_watchdog("the pooler's watchdog", script, &[pid.as_ref(), self.dir.path().as_os_str()]);
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let Some(pid) = self.pid() else { return };
        let _ = Command::new("kill").arg(&pid).status();
        // Gone before its directory is: asked to stop (it removes its pidfile as it exits), then
        // made to.
        let pidfile = self.dir.path().join("pgbouncer.pid");
        for _ in 0..100 {
            if !pidfile.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = Command::new("kill").args(["-9", &pid]).status();
    }
}

/// The `pgbouncer` program.
fn pgbouncer() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("pgbouncer"))
        .find(|program| program.is_file())
}
