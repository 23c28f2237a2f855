//! The PostgreSQL side of the seam: connecting (settings from the URL, then libpq's
//! environment variables), translating the engine's SQL, binding parameters to the types the
//! server asks for, and reading columns into the storage classes of [`ValueRef`].

use super::value::{Params, Value, ValueRef};
use crate::error::{Error, ErrorKind, Result};
use ::postgres::error::SqlState;
use ::postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use ::postgres::{Client, Config, NoTls, Row, Statement};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::str::FromStr;
use std::time::Duration;

/// Whether a database location names a PostgreSQL server.
pub(crate) fn is_url(location: &str) -> bool {
    ["postgres://", "postgresql://"].iter().any(|scheme| location.starts_with(scheme))
}

/// A URL's parts as the client reads them: the user info runs to the first `@`, wherever it is
/// (a password may hold `/`, `?` or `#`), the hosts to the next `/` or `?`.
struct UrlParts<'u> {
    scheme: &'u str,
    user_info: Option<&'u str>,
    hosts: &'u str,
    /// The database and the parameters.
    tail: &'u str,
}

impl<'u> UrlParts<'u> {
    fn of(url: &'u str) -> Option<UrlParts<'u>> {
        let (scheme, rest) = url.split_once("://")?;
        let (user_info, rest) = match rest.split_once('@') {
            Some((user_info, rest)) => (Some(user_info), rest),
            None => (None, rest),
        };
        let (hosts, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        Some(UrlParts { scheme, user_info, hosts, tail })
    }

    /// `user@`, without the password (empty without user info).
    fn user(&self) -> String {
        self.user_info
            .map_or(String::new(), |info| format!("{}@", info.split(':').next().unwrap_or_default()))
    }
}

/// `url` without its password (in the user info or a `password=` parameter), to show.
pub(crate) fn without_password(url: &str) -> String {
    let Some(parts) = UrlParts::of(url) else { return url.to_string() };
    let tail = match parts.tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query.split('&').filter(|p| !p.starts_with("password=")).collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => parts.tail.to_string(),
    };
    format!("{}://{}{}{tail}", parts.scheme, parts.user(), parts.hosts)
}

/// A connection, and the engine's statements as translated for it.
///
/// A statement's first run goes to the server with its parameters' types in one message, one
/// round trip: a CLI call runs most statements once, and preparing them would cost a second
/// round trip for nothing. The types come from the values (an integer is BIGINT, a real DOUBLE
/// PRECISION, text TEXT, a blob BYTEA; NULL is left for the server to infer), which is what the
/// schema's columns hold. A statement run again in a transaction is prepared then, and reused
/// after (a loop): the server plans it once. It is closed before the transaction ends, so that
/// no prepared statement outlives one: behind a pooler that gives each transaction another
/// server session (which memctl does not support, see the README), a statement's name never
/// meets another's.
pub(crate) struct PgClient {
    client: RefCell<Client>,
    /// The session's settings (schema, lock timeout, messages) until they are sent, with the
    /// first request (startup options would cost no round trip, but a pooler refuses them).
    unsent: RefCell<Option<String>>,
    /// Per statement text as the engine wrote it.
    statements: RefCell<HashMap<String, Rc<Translated>>>,
    /// Names the engine's SQL uses and what they stand for on this connection (see
    /// [`PgClient::substitute`]).
    substitutions: RefCell<Vec<(String, String)>>,
    /// Values the connection binds itself, by the word that stands for them in a substitution
    /// (see [`PgClient::set_argument`]).
    arguments: RefCell<Vec<(&'static str, String)>>,
    in_transaction: Cell<bool>,
    /// How many times `gc` had collected branches when the call's first batch read it
    /// (schema/postgres.rs), until the view's first check of its path cache takes it
    /// (view/path.rs).
    collections_at_start: Cell<Option<i64>>,
}

/// A statement of the engine, for this connection.
struct Translated {
    text: String,
    /// Its named parameters in `$n` order.
    names: Vec<String>,
    /// How many parameters of its own it has (its arguments are numbered after them).
    parameters: usize,
    /// The connection's arguments it reads, bound after its own parameters.
    arguments: Vec<&'static str>,
    /// Prepared on its second run.
    prepared: RefCell<Option<Statement>>,
    runs: Cell<u32>,
}

impl PgClient {
    /// Connects to `url`. Settings the URL leaves out come from `PGHOST`, `PGPORT`, `PGUSER`,
    /// `PGPASSWORD`, `PGDATABASE`, `PGAPPNAME` and `PGCONNECT_TIMEOUT`, as libpq takes them.
    /// Tables are looked for in `schema`; lock waits give up after `lock_timeout_ms` (exit 5, as
    /// SQLite's busy timeout). Both are set with the first request: with it, costing no round
    /// trip of their own, when it is a batch outside a transaction ([`PgClient::batch_rows`]),
    /// else alone before it (also after a first batch that failed, undone whole).
    pub fn connect(url: &str, schema: &str, lock_timeout_ms: u64) -> Result<PgClient> {
        let url = with_port(url, std::env::var("PGPORT").ok().as_deref());
        let mut config = Config::from_str(&url).map_err(|e| {
            Error::invalid(format!("not a valid PostgreSQL URL: {}", without_url(&e.to_string())))
        })?;
        apply_environment(&mut config, |name| std::env::var(name).ok());
        let settings = format!(
            "SET search_path TO {schema}; SET lock_timeout = '{lock_timeout_ms}ms'; \
             SET client_min_messages = warning"
        );
        let client = config.connect(NoTls).map_err(|e| {
            Error::incompatible(format!("cannot connect to PostgreSQL: {}", reason(&e))).with_hint(
                "check the URL's host, port, user and database, or PGHOST/PGPORT/PGUSER/PGDATABASE",
            )
        })?;
        Ok(PgClient {
            client: RefCell::new(client),
            unsent: RefCell::new(Some(settings)),
            statements: RefCell::new(HashMap::new()),
            substitutions: RefCell::new(Vec::new()),
            arguments: RefCell::new(Vec::new()),
            in_transaction: Cell::new(false),
            collections_at_start: Cell::new(None),
        })
    }

    /// From now on, `name` in the engine's SQL stands for `sql` (e.g. a table that is cheaper
    /// on PostgreSQL as an expression).
    pub fn substitute(&self, name: &str, sql: &str) {
        let mut substitutions = self.substitutions.borrow_mut();
        if !substitutions.iter().any(|(n, _)| n == name) {
            substitutions.push((name.to_string(), sql.to_string()));
            self.statements.borrow_mut().clear();
        }
    }

    /// From now on, the word `word` in a substitution's SQL stands for a parameter the
    /// connection binds to `value`, after the statement's own: a value that changes from one
    /// statement to the next without changing the statements (which stay prepared), nor
    /// leaving anything in the server's session.
    pub fn set_argument(&self, word: &'static str, value: String) {
        let mut arguments = self.arguments.borrow_mut();
        match arguments.iter_mut().find(|(w, _)| *w == word) {
            Some((_, held)) => *held = value,
            None => {
                arguments.push((word, value));
                self.statements.borrow_mut().clear();
            }
        }
    }

    /// `sql` translated for this connection.
    fn translated(&self, sql: &str) -> Translated {
        let substituted = self
            .substitutions
            .borrow()
            .iter()
            .fold(sql.to_string(), |sql, (name, with)| sql.replace(name.as_str(), with));
        let (mut text, names, positional) = translate(&substituted);
        let parameters = names.len().max(positional);
        let mut count = parameters;
        let mut arguments = Vec::new();
        for (word, _) in self.arguments.borrow().iter() {
            if text.contains(word) {
                count += 1;
                text = text.replace(word, &format!("${count}"));
                arguments.push(*word);
            }
        }
        Translated { text, names, parameters, arguments, prepared: RefCell::new(None), runs: Cell::new(0) }
    }

    /// The values of `statement`'s arguments.
    fn arguments_of(&self, statement: &Translated) -> Result<Vec<Value<'static>>> {
        let arguments = self.arguments.borrow();
        statement
            .arguments
            .iter()
            .map(|word| match arguments.iter().find(|(w, _)| w == word) {
                Some((_, value)) => Ok(Value::from(value.clone())),
                None => Err(Error::internal(format!("argument {word} is not set"))),
            })
            .collect()
    }

    pub fn in_transaction(&self) -> bool {
        self.in_transaction.get()
    }

    /// Opens a transaction with `begin` (`BEGIN …`).
    pub fn begin(&self, begin: &str) -> Result<()> {
        self.execute(begin, &Params::Positional(Vec::new()))?;
        self.in_transaction.set(true);
        Ok(())
    }

    pub fn execute(&self, sql: &str, params: &Params<'_>) -> Result<usize> {
        self.send_settings()?;
        let (statement, values) = self.bind(sql, params)?;
        let arguments = self.arguments_of(&statement)?;
        let values = with_arguments(values, &arguments);
        let mut client = self.client.borrow_mut();
        let changed = match self.prepared(&statement, &values, &mut client)? {
            Some(prepared) => client.execute(&prepared, &untyped(&values)),
            None => client.execute_typed(&statement.text, &typed(&values)),
        };
        Ok(changed.map_err(|e| in_statement(e, &statement.text))? as usize)
    }

    pub fn query(&self, sql: &str, params: &Params<'_>) -> Result<Vec<Row>> {
        self.send_settings()?;
        let (statement, values) = self.bind(sql, params)?;
        let arguments = self.arguments_of(&statement)?;
        let values = with_arguments(values, &arguments);
        let mut client = self.client.borrow_mut();
        let rows = match self.prepared(&statement, &values, &mut client)? {
            Some(prepared) => client.query(&prepared, &untyped(&values)),
            None => client.query_typed(&statement.text, &typed(&values)),
        };
        rows.map_err(|e| in_statement(e, &statement.text))
    }

    /// The prepared form of a statement from its second run in a transaction on, with the
    /// parameter types the values have, as its first run sent them (NULL: inferred).
    fn prepared(
        &self,
        statement: &Translated,
        values: &[&Value<'_>],
        client: &mut Client,
    ) -> Result<Option<Statement>> {
        if !self.in_transaction.get() {
            return Ok(None);
        }
        let runs = statement.runs.get() + 1;
        statement.runs.set(runs);
        if runs < 2 {
            return Ok(None);
        }
        let mut prepared = statement.prepared.borrow_mut();
        if prepared.is_none() {
            let types: Vec<Type> = values.iter().map(|v| type_of(v)).collect();
            let made = client
                .prepare_typed(&statement.text, &types)
                .map_err(|e| in_statement(e, &statement.text))?;
            *prepared = Some(made);
        }
        Ok(prepared.clone())
    }

    /// Opens a transaction with `begin`, then runs `first` (no parameters), in one round trip;
    /// the first column of its rows, as text.
    pub fn begin_with(&self, begin: &str, first: &str) -> Result<Vec<Option<String>>> {
        self.in_transaction.set(true);
        self.batch_rows(&format!("{begin}; {first}"))
    }

    /// Runs `last` (no parameters), then commits, in one round trip.
    pub fn commit_after(&self, last: &str) -> Result<()> {
        self.end(&format!("{last}; COMMIT"))
    }

    /// Ends the transaction with `last` (statements without parameters ending in `COMMIT` or
    /// `ROLLBACK`), in one round trip, after closing the statements prepared in it (a closed
    /// statement's message goes ahead of the next request). If it fails, the transaction is
    /// taken as still open (statements before a failed `COMMIT` leave it open; a failed
    /// `COMMIT` itself ends it): the caller rolls back, which ends it either way.
    pub fn end(&self, last: &str) -> Result<()> {
        for statement in self.statements.borrow().values() {
            statement.prepared.take();
            statement.runs.set(0);
        }
        self.batch(last)?;
        self.in_transaction.set(false);
        Ok(())
    }

    /// Runs `sql` (statements without parameters, in PostgreSQL's own SQL: not translated) in
    /// one round trip, after the session's settings if they are not sent yet (in a round trip
    /// of their own within a transaction); the first column of each row it returns, as text.
    pub fn batch_rows(&self, sql: &str) -> Result<Vec<Option<String>>> {
        Ok(self.run_batch(sql)??)
    }

    /// [`PgClient::batch_rows`] outside a transaction, or None when the server finds no table
    /// or schema that `sql` names (the failed batch is undone whole: nothing else happens).
    pub fn batch_rows_if_present(&self, sql: &str) -> Result<Option<Vec<Option<String>>>> {
        if self.in_transaction.get() {
            return Err(Error::internal("a missing table would abort the open transaction"));
        }
        match self.run_batch(sql)? {
            Ok(rows) => Ok(Some(rows)),
            Err(e)
                if e.code().is_some_and(|c| {
                    [&SqlState::UNDEFINED_TABLE, &SqlState::INVALID_SCHEMA_NAME].contains(&c)
                }) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The batch of [`PgClient::batch_rows`]: outside, the failure to send the settings first;
    /// inside, the batch's own.
    fn run_batch(&self, sql: &str) -> Result<std::result::Result<Vec<Option<String>>, ::postgres::Error>> {
        // Within a transaction the settings would be undone by its rollback: sent alone first.
        if self.in_transaction.get() {
            self.send_settings()?;
        }
        let settings = self.unsent.take();
        let batch = match &settings {
            Some(settings) => format!("{settings}; {sql}"),
            None => sql.to_string(),
        };
        // A failed batch is undone whole, the settings with it: still to send.
        let messages = self.client.borrow_mut().simple_query(&batch).inspect_err(|_| {
            self.unsent.replace(settings);
        });
        Ok(messages.map(|messages| {
            messages
                .iter()
                .filter_map(|m| match m {
                    ::postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_string)),
                    _ => None,
                })
                .collect()
        }))
    }

    /// Keeps the collection count the call's first batch read, for [`PgClient::take_collections_at_start`].
    pub fn note_collections_at_start(&self, collections: i64) {
        self.collections_at_start.set(Some(collections));
    }

    /// The collection count the call's first batch read, once.
    pub fn take_collections_at_start(&self) -> Option<i64> {
        self.collections_at_start.take()
    }

    pub fn batch(&self, sql: &str) -> Result<()> {
        self.batch_rows(sql).map(drop)
    }

    /// Sends the session's settings in a round trip of their own, if the first request is not
    /// a batch that takes them along.
    fn send_settings(&self) -> Result<()> {
        let Some(settings) = self.unsent.take() else { return Ok(()) };
        self.client.borrow_mut().batch_execute(&settings).map_err(|e| {
            self.unsent.replace(Some(settings));
            Error::from(e)
        })
    }

    /// The statement `sql` and its parameters in `$n` order.
    fn bind<'p>(&self, sql: &str, params: &'p Params<'_>) -> Result<(Rc<Translated>, Vec<&'p Value<'p>>)> {
        let known = self.statements.borrow().get(sql).cloned();
        let statement = match known {
            Some(statement) => statement,
            None => {
                let statement = Rc::new(self.translated(sql));
                self.statements.borrow_mut().insert(sql.to_owned(), statement.clone());
                statement
            }
        };
        let names = &statement.names;
        let values: Vec<&Value<'_>> = match params {
            Params::Positional(values) => values.iter().collect(),
            Params::Named(values) => names
                .iter()
                .map(|name| {
                    values
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v)
                        .ok_or_else(|| Error::internal(format!("parameter {name} is not bound")))
                })
                .collect::<Result<_>>()?,
        };
        // An extra value would take the place of the first argument.
        if !statement.arguments.is_empty() && values.len() != statement.parameters {
            return Err(Error::internal(format!(
                "{} values bound to the {} parameters of: {sql}",
                values.len(),
                statement.parameters
            )));
        }
        Ok((statement, values))
    }
}

/// A statement's values, then its arguments' ([`PgClient::set_argument`]).
fn with_arguments<'v>(values: Vec<&'v Value<'v>>, arguments: &'v [Value<'v>]) -> Vec<&'v Value<'v>> {
    values.into_iter().chain(arguments).collect()
}

/// Parameters for a prepared statement, whose types the server inferred.
fn untyped<'v>(values: &[&'v Value<'v>]) -> Vec<&'v (dyn ToSql + Sync)> {
    values.iter().map(|&value| value as &(dyn ToSql + Sync)).collect()
}

/// The type a parameter is sent as: the schema's type for its kind of value (NULL: for the
/// server to infer).
fn type_of(value: &Value<'_>) -> Type {
    match value {
        Value::Null => Type::UNKNOWN,
        Value::Int(_) => Type::INT8,
        Value::Real(_) => Type::FLOAT8,
        Value::Text(_) => Type::TEXT,
        Value::Blob(_) => Type::BYTEA,
    }
}

/// Parameters with the types their values have.
fn typed<'v>(values: &[&'v Value<'v>]) -> Vec<(&'v (dyn ToSql + Sync), Type)> {
    values.iter().map(|&value| (value as &(dyn ToSql + Sync), type_of(value))).collect()
}

/// `url` with `port` (libpq's `PGPORT`) given to each host that names none: the client fills in
/// 5432 as it parses a URL, after which a missing port cannot be told from an explicit one.
fn with_port(url: &str, port: Option<&str>) -> String {
    let Some(port) = port.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) else {
        return url.to_string();
    };
    let Some(parts) = UrlParts::of(url) else { return url.to_string() };
    let UrlParts { scheme, user_info, hosts, tail } = parts;
    let user = user_info.map_or(String::new(), |info| format!("{info}@"));
    if hosts.is_empty() {
        // Hosts as parameters (`?host=/socket/dir`): the port too, unless one is there.
        let has_port = tail.split(['?', '&']).any(|p| p.starts_with("port="));
        let joiner = if tail.contains('?') { "&" } else { "?" };
        let tail = if has_port { tail.to_string() } else { format!("{tail}{joiner}port={port}") };
        return format!("{scheme}://{user}{tail}");
    }
    let hosts: Vec<String> = hosts
        .split(',')
        .map(|host| {
            let named = host.rsplit_once(']').map_or(host, |(_, after)| after).contains(':');
            if named {
                host.to_string()
            } else {
                format!("{host}:{port}")
            }
        })
        .collect();
    format!("{scheme}://{user}{}{tail}", hosts.join(","))
}

/// libpq's environment variables for what the URL left out (`env` reads one).
fn apply_environment(config: &mut Config, env: impl Fn(&str) -> Option<String>) {
    if config.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(hosts) => hosts.split(',').for_each(|h| {
                config.host(h);
            }),
            // libpq's default: the local server's socket directory.
            None => {
                config.host(if std::path::Path::new("/var/run/postgresql").exists() {
                    "/var/run/postgresql"
                } else {
                    "localhost"
                });
            }
        }
    }
    if config.get_user().is_none() {
        if let Some(user) = env("PGUSER") {
            config.user(&user);
        }
    }
    if config.get_password().is_none() {
        if let Some(password) = env("PGPASSWORD") {
            config.password(password);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(dbname) = env("PGDATABASE") {
            config.dbname(&dbname);
        }
    }
    if config.get_application_name().is_none() {
        config.application_name(&env("PGAPPNAME").unwrap_or_else(|| "memctl".into()));
    }
    if config.get_connect_timeout().is_none() {
        if let Some(seconds) = env("PGCONNECT_TIMEOUT").and_then(|s| s.parse().ok()) {
            config.connect_timeout(Duration::from_secs(seconds));
        }
    }
}

/// Rewrites the engine's SQL for PostgreSQL: `?N` → `$N`, `:name` → `$k` (numbered in order
/// of first use, returned), and SQLite's planner hints dropped: `INDEXED
/// BY name`, and `CROSS` of `CROSS JOIN … ON` (the engine writes no CROSS JOIN without ON).
/// Quoted strings and identifiers, and comments, are copied as they are. A statement uses
/// positional or named parameters, never both.
pub(super) fn translate(sql: &str) -> (String, Vec<String>, usize) {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut names: Vec<String> = Vec::new();
    let mut positional = 0;
    let chars: Vec<char> = sql.chars().collect();
    let word_at = |i: usize| -> String {
        chars[i..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').collect()
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let prev_is_word = i > 0 && (chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '_');
        match c {
            '-' if chars.get(i + 1) == Some(&'-') => {
                let end = chars[i..].iter().position(|&d| d == '\n').map_or(chars.len(), |p| i + p);
                out.extend(&chars[i..end]);
                i = end;
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                let end = (i + 2..chars.len().saturating_sub(1))
                    .find(|&j| chars[j] == '*' && chars[j + 1] == '/')
                    .map_or(chars.len(), |j| j + 2);
                out.extend(&chars[i..end]);
                i = end;
            }
            '\'' | '"' => {
                let end = chars[i + 1..].iter().position(|&d| d == c).map_or(chars.len(), |p| i + 1 + p);
                out.extend(&chars[i..=end.min(chars.len() - 1)]);
                i = end + 1;
            }
            '?' => {
                let digits: String = chars[i + 1..].iter().take_while(|c| c.is_ascii_digit()).collect();
                positional = positional.max(digits.parse().unwrap_or(0));
                out.push('$');
                out.push_str(&digits);
                i += 1 + digits.len();
            }
            ':' if chars.get(i + 1) == Some(&':') => {
                out.push_str("::");
                i += 2;
            }
            ':' if chars.get(i + 1).is_some_and(|c| c.is_ascii_alphabetic()) => {
                let name = format!(":{}", word_at(i + 1));
                let k = match names.iter().position(|n| *n == name) {
                    Some(k) => k,
                    None => {
                        names.push(name.clone());
                        names.len() - 1
                    }
                };
                out.push_str(&format!("${}", k + 1));
                i += name.len();
            }
            _ if !prev_is_word && c.is_ascii_alphabetic() => {
                let word = word_at(i);
                if word.eq_ignore_ascii_case("cross")
                    && word_at(skip_spaces(&chars, i + 5)).eq_ignore_ascii_case("join")
                {
                    // SQLite's CROSS JOIN … ON fixes the join order; PostgreSQL plans its own.
                    i += 5;
                } else if word.eq_ignore_ascii_case("indexed")
                    && word_at(skip_spaces(&chars, i + 7)).eq_ignore_ascii_case("by")
                {
                    let name_at = skip_spaces(&chars, skip_spaces(&chars, i + 7) + 2);
                    i = name_at + word_at(name_at).len();
                } else {
                    out.push_str(&word);
                    i += word.len();
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    debug_assert!(names.is_empty() || !sql.contains('?'), "mixed parameters in: {sql}");
    (out, names, positional)
}

fn skip_spaces(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// Column `index` of `row` as a storage class.
pub(super) fn value(row: &Row, index: usize) -> Result<ValueRef<'_>> {
    row.try_get::<_, Column<'_>>(index).map(|c| c.0).map_err(|e| Error::internal(reason(&e)))
}

/// Any column the schema uses, read into its storage class.
struct Column<'r>(ValueRef<'r>);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl<'r> FromSql<'r> for Column<'r> {
    fn from_sql(ty: &Type, raw: &'r [u8]) -> std::result::Result<Self, BoxError> {
        Ok(Column(match *ty {
            Type::INT8 => ValueRef::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => ValueRef::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => ValueRef::Int(i16::from_sql(ty, raw)?.into()),
            Type::OID => ValueRef::Int(u32::from_sql(ty, raw)?.into()),
            Type::BOOL => ValueRef::Int(bool::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => ValueRef::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => ValueRef::Real(f32::from_sql(ty, raw)?.into()),
            Type::BYTEA => ValueRef::Blob(raw),
            Type::JSONB => ValueRef::Text(std::str::from_utf8(raw.get(1..).unwrap_or_default())?),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON => {
                ValueRef::Text(std::str::from_utf8(raw)?)
            }
            _ => return Err(format!("a column of type {ty} (the engine reads no such column)").into()),
        }))
    }

    fn from_sql_null(_: &Type) -> std::result::Result<Self, BoxError> {
        Ok(Column(ValueRef::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

impl ToSql for Value<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> std::result::Result<IsNull, BoxError> {
        match (self, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Int(v), &Type::INT8) => v.to_sql(ty, out),
            (Value::Int(v), &Type::INT4) => i32::try_from(*v)?.to_sql(ty, out),
            (Value::Int(v), &Type::INT2) => i16::try_from(*v)?.to_sql(ty, out),
            (Value::Int(v), &Type::FLOAT8) => (*v as f64).to_sql(ty, out),
            (Value::Int(v), &Type::BOOL) => (*v != 0).to_sql(ty, out),
            (Value::Int(v), &Type::TEXT | &Type::VARCHAR) => v.to_string().to_sql(ty, out),
            (Value::Real(v), &Type::FLOAT8) => v.to_sql(ty, out),
            (Value::Real(v), &Type::FLOAT4) => (*v as f32).to_sql(ty, out),
            (Value::Text(v), &Type::JSONB) => {
                out.extend_from_slice(&[1]);
                out.extend_from_slice(v.as_bytes());
                Ok(IsNull::No)
            }
            (Value::Text(v), &Type::JSON) => {
                out.extend_from_slice(v.as_bytes());
                Ok(IsNull::No)
            }
            (Value::Text(v), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME | &Type::UNKNOWN) => {
                v.as_ref().to_sql(ty, out)
            }
            (Value::Blob(v), &Type::BYTEA) => v.as_ref().to_sql(ty, out),
            (value, ty) => Err(format!("cannot bind {value:?} to a parameter of type {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// An error of a statement, named with its text (for engine bugs; the kind is kept).
fn in_statement(err: ::postgres::Error, sql: &str) -> Error {
    let error = Error::from(err);
    let message = format!("{} in {}", error.message(), sql.split_whitespace().collect::<Vec<_>>().join(" "));
    error.with_message(message)
}

/// The server's words for an error, without the client's wrapping.
fn reason(err: &::postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => without_url(&err.to_string()),
    }
}

/// A client message, cut before anything that could repeat the URL (and its password).
fn without_url(message: &str) -> String {
    message.split("postgres").next().unwrap_or_default().trim_end_matches([' ', ':', '`', '\'']).to_string()
}

impl From<::postgres::Error> for Error {
    fn from(err: ::postgres::Error) -> Self {
        let code = err.code();
        let busy = [
            &SqlState::LOCK_NOT_AVAILABLE,
            &SqlState::T_R_DEADLOCK_DETECTED,
            &SqlState::T_R_SERIALIZATION_FAILURE,
        ];
        if code.is_some_and(|c| busy.contains(&c)) {
            return Error::new(
                ErrorKind::Busy,
                "the database stayed locked by other writers past busy_timeout",
            )
            .with_hint(
                "another process held the write lock past busy_timeout; raise [sqlite] busy_timeout_ms",
            );
        }
        let io = std::error::Error::source(&err).is_some_and(|s| s.is::<std::io::Error>());
        if err.is_closed() || io {
            return Error::incompatible(format!("lost the PostgreSQL connection: {}", reason(&err)));
        }
        Error::internal(format!("database error: {}", reason(&err)))
    }
}

/// A throwaway PostgreSQL cluster, shared with the end-to-end tests.
#[cfg(test)]
#[path = "../../../../tests/support/postgres.rs"]
#[allow(dead_code)]
mod test_cluster;

#[cfg(test)]
mod tests {
    use super::*;

    /// The session's settings reach the server whatever the connection's first request is: a
    /// statement (they go alone before it), a batch that fails (undone whole, they are still to
    /// send), a transaction (they are not left to its rollback).
    #[test]
    fn settings_reach_the_session_whatever_comes_first() {
        let Some(cluster) = test_cluster::Cluster::shared("settings_reach_the_session") else { return };
        let url = cluster.new_database();
        let connect = || PgClient::connect(&url, "memctl", 1234).unwrap();
        let timeout = "SELECT current_setting('lock_timeout')";
        let setting = |client: &PgClient| client.batch_rows(timeout).unwrap();
        let expected = [Some("1234ms".to_string())];

        let client = connect();
        let rows = client.query(timeout, &Params::Positional(Vec::new())).unwrap();
        assert_eq!(rows[0].get::<_, String>(0), "1234ms", "a statement first");

        let client = connect();
        assert!(client.batch_rows("SELECT 1 / 0").is_err());
        assert_eq!(setting(&client), expected, "a failed batch first");

        let client = connect();
        client.begin_with("BEGIN", "SELECT 1").unwrap();
        client.end("ROLLBACK").unwrap();
        assert_eq!(setting(&client), expected, "a transaction first, rolled back");
        assert_eq!(client.batch_rows("SHOW search_path").unwrap(), [Some("memctl".to_string())]);
    }

    #[test]
    fn translates_placeholders_and_sqlite_spellings() {
        let (sql, names, positional) =
            translate("SELECT ':x?1', t.a::text FROM view_path p CROSS JOIN t INDEXED BY t_i ON t.b = ?2");
        assert_eq!(sql, "SELECT ':x?1', t.a::text FROM view_path p  JOIN t  ON t.b = $2");
        assert!(names.is_empty());
        assert_eq!(positional, 2);
        let (sql, names, positional) = translate("WHERE :now > :last AND ttl < :now");
        assert_eq!(sql, "WHERE $1 > $2 AND ttl < $1");
        assert_eq!(names, vec![":now", ":last"]);
        assert_eq!(positional, 0);
        let (sql, _, _) =
            translate("SELECT 1 -- it's ?1 in temp.x\n, ?1 /* ':y' */ FROM t WHERE x = 'a:b ?2'");
        assert_eq!(sql, "SELECT 1 -- it's ?1 in temp.x\n, $1 /* ':y' */ FROM t WHERE x = 'a:b ?2'");
    }

    #[test]
    fn shown_urls_hold_no_password() {
        assert_eq!(
            without_password("postgres://al:s3cret@db:5432/run?sslmode=disable"),
            "postgres://al@db:5432/run?sslmode=disable"
        );
        assert_eq!(without_password("postgresql:///run?host=/tmp&password=x"), "postgresql:///run?host=/tmp");
        assert_eq!(without_password("postgres://db/run"), "postgres://db/run");
        assert_eq!(without_password("postgres://al:p/a?s#s@db/run"), "postgres://al@db/run");
        assert_eq!(without_password("postgres://al:p@s@db/run"), "postgres://al@s@db/run");
    }

    #[test]
    fn environment_fills_what_the_url_leaves_out() {
        let mut config =
            Config::from_str(&with_port("postgres://alice@db.example/run", Some("6543"))).unwrap();
        let env = |name: &str| match name {
            "PGUSER" => Some("bob".to_string()),
            "PGDATABASE" => Some("other".to_string()),
            _ => None,
        };
        apply_environment(&mut config, env);
        assert_eq!(config.get_user(), Some("alice"));
        assert_eq!(config.get_dbname(), Some("run"));
        assert_eq!(config.get_ports(), &[6543]);
        assert_eq!(config.get_application_name(), Some("memctl"));
        let mut bare = Config::from_str("postgresql:///").unwrap();
        apply_environment(&mut bare, env);
        assert_eq!((bare.get_user(), bare.get_dbname()), (Some("bob"), Some("other")));
    }

    #[test]
    fn pgport_goes_to_hosts_without_a_port() {
        assert_eq!(with_port("postgres://a@h1,h2:7/db", Some("6543")), "postgres://a@h1:6543,h2:7/db");
        assert_eq!(with_port("postgres://[::1]/db", Some("6543")), "postgres://[::1]:6543/db");
        assert_eq!(with_port("postgres://a@/db?host=/s", Some("6543")), "postgres://a@/db?host=/s&port=6543");
        assert_eq!(with_port("postgres://a@/db?port=1", Some("6543")), "postgres://a@/db?port=1");
        assert_eq!(with_port("postgres://h/db", None), "postgres://h/db");
    }
}
