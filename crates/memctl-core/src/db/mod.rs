//! The one seam between the engine and its database: SQL text and parameters in, rows out, on
//! SQLite (the embedded default) or PostgreSQL (runs spanning hosts). Everything above speaks
//! one SQL; the few spellings the two disagree on are settled here (placeholders, planner
//! hints) or asked of [`Backend`] where a statement is written.
//!
//! SQLite statements run as written, through rusqlite's statement cache. PostgreSQL statements
//! are translated once per text (postgres.rs), sent with their parameters' types on their first
//! run in a transaction and prepared on their second.

mod postgres;
mod value;

pub(crate) use postgres::{is_url, without_password, PgClient};
pub(crate) use value::{FromValue, Params, Value, ValueRef};

use crate::error::{Error, Result};
use std::ops::ControlFlow;

/// Which database a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// A table of the elements of a JSON array of integers (`json`, an SQL expression), with
    /// columns `key` (position from 0) and `value`.
    pub fn json_ints(self, json: &str) -> String {
        self.json_elements(json, "BIGINT")
    }

    /// A table of the elements of a JSON array of strings, as [`Backend::json_ints`].
    pub fn json_texts(self, json: &str) -> String {
        self.json_elements(json, "TEXT")
    }

    fn json_elements(self, json: &str, ty: &str) -> String {
        match self {
            Backend::Sqlite => format!("json_each({json})"),
            Backend::Postgres => format!(
                "(SELECT n - 1 AS key, CAST(e AS {ty}) AS value
                  FROM json_array_elements_text(CAST({json} AS json)) WITH ORDINALITY AS j(e, n))"
            ),
        }
    }
}

/// An open database connection.
pub(crate) enum Conn {
    Sqlite(rusqlite::Connection),
    /// Boxed: a client is much larger than a handle.
    Postgres(Box<PgClient>),
}

/// One result row, read by column position.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r ::postgres::Row),
}

impl Row<'_> {
    /// Column `index` as `T` (a NULL only into an `Option`).
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T> {
        T::from_value(self.value(index)?)
            .map_err(|e| Error::internal(format!("column {index}: {}", e.message())))
    }

    /// Column `index`, a text, as its bytes: on SQLite not checked for UTF-8 (unlike
    /// [`Row::value`], which checks every text), for a reader that looks at most of its bytes
    /// as ASCII anyway; on PostgreSQL checked as read. Any other value is `as_str`'s mismatch
    /// error.
    pub fn text_bytes(&self, index: usize) -> Result<&[u8]> {
        match self {
            Row::Sqlite(row) => match row.get_ref(index)? {
                rusqlite::types::ValueRef::Text(bytes) => Ok(bytes),
                other => Err(ValueRef::from(other).mismatch("text")),
            },
            Row::Postgres(_) => Ok(self.value(index)?.as_str()?.as_bytes()),
        }
    }

    /// Column `index` as it is stored.
    pub fn value(&self, index: usize) -> Result<ValueRef<'_>> {
        match self {
            Row::Sqlite(row) => Ok(ValueRef::from(row.get_ref(index)?)),
            Row::Postgres(row) => postgres::value(row, index),
        }
    }
}

impl Conn {
    pub fn backend(&self) -> Backend {
        match self {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Postgres(_) => Backend::Postgres,
        }
    }

    /// The SQLite connection of a store with an FTS5 index, which only SQLite has.
    pub fn fts5(&self) -> Result<&rusqlite::Connection> {
        self.sqlite().ok_or_else(|| Error::internal("FTS5 is SQLite's"))
    }

    /// The SQLite connection, for what only SQLite has (FTS5, its file, its pragmas).
    pub fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Conn::Sqlite(conn) => Some(conn),
            Conn::Postgres(_) => None,
        }
    }

    /// Runs one statement; returns the number of rows it changed.
    pub fn execute<'a>(&self, sql: &str, params: impl Into<Params<'a>>) -> Result<usize> {
        match self {
            Conn::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                Ok(match params.into() {
                    Params::Positional(values) => stmt.execute(rusqlite::params_from_iter(values.iter()))?,
                    Params::Named(values) => stmt.execute(&*value::named(&values))?,
                })
            }
            Conn::Postgres(client) => client.execute(sql, &params.into().without_nul()?),
        }
    }

    /// SQLite's plan of `sql`, a line per step (tests hold statements to their indexes).
    #[cfg(test)]
    pub(crate) fn query_plan<'a>(&self, sql: &str, params: impl Into<Params<'a>>) -> String {
        let plan = self.query(&format!("EXPLAIN QUERY PLAN {sql}"), params, |r| r.get::<String>(3));
        plan.unwrap().join("\n")
    }

    /// Runs one query and maps each row with `f`.
    pub fn query<'a, T>(
        &self,
        sql: &str,
        params: impl Into<Params<'a>>,
        f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.rows(sql, params.into(), usize::MAX, f)
    }

    /// The first row of a query mapped with `f`, or None when it returns none.
    pub fn query_opt<'a, T>(
        &self,
        sql: &str,
        params: impl Into<Params<'a>>,
        f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        Ok(self.rows(sql, params.into(), 1, f)?.pop())
    }

    /// The first `limit` rows of a query, each mapped with `f`.
    fn rows<T>(
        &self,
        sql: &str,
        params: Params<'_>,
        limit: usize,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.each(sql, params, |row| {
            out.push(f(row)?);
            Ok(if out.len() < limit { ControlFlow::Continue(()) } else { ControlFlow::Break(()) })
        })?;
        Ok(out)
    }

    /// Runs one query and hands each row to `f`, until `f` breaks (SQLite then reads no
    /// further).
    pub fn each<'a>(
        &self,
        sql: &str,
        params: impl Into<Params<'a>>,
        mut f: impl FnMut(&Row<'_>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                let mut rows = match params.into() {
                    Params::Positional(values) => stmt.query(rusqlite::params_from_iter(values.iter()))?,
                    Params::Named(values) => stmt.query(&*value::named(&values))?,
                };
                while let Some(row) = rows.next()? {
                    if f(&Row::Sqlite(row))?.is_break() {
                        break;
                    }
                }
            }
            Conn::Postgres(client) => {
                for row in &client.query(sql, &params.into().without_nul()?)? {
                    if f(&Row::Postgres(row))?.is_break() {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// The first row of a query that always returns one, mapped with `f`.
    pub fn query_one<'a, T>(
        &self,
        sql: &str,
        params: impl Into<Params<'a>>,
        f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?
            .ok_or_else(|| Error::internal(format!("a query returned no row: {}", first_line(sql))))
    }

    /// Runs one INSERT of one row whose key, `key`, the database assigns (on SQLite the table's
    /// INTEGER PRIMARY KEY, its rowid); returns the key. SQLite reports it (`last_insert_rowid`):
    /// its RETURNING gathers the rows in a temporary table first, about a seventh of a fork's
    /// instructions. PostgreSQL is asked with RETURNING.
    pub fn insert_returning_key<'a>(
        &self,
        sql: &str,
        key: &str,
        params: impl Into<Params<'a>>,
    ) -> Result<i64> {
        match self {
            Conn::Sqlite(conn) => match self.execute(sql, params)? {
                1 => Ok(conn.last_insert_rowid()),
                n => Err(Error::internal(format!("an insert of one row wrote {n}: {}", first_line(sql)))),
            },
            Conn::Postgres(_) => self.query_one(&format!("{sql} RETURNING {key}"), params, |r| r.get(0)),
        }
    }

    /// Whether a query returns any row.
    pub fn exists<'a>(&self, sql: &str, params: impl Into<Params<'a>>) -> Result<bool> {
        Ok(self.query_opt(sql, params, |_| Ok(()))?.is_some())
    }

    /// Runs statements separated by semicolons, without parameters, in the database's own SQL
    /// (not translated).
    pub fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Conn::Postgres(client) => client.batch(sql),
        }
    }

    /// Opens a transaction with `begin` (`BEGIN …` in the backend's words).
    pub fn begin(&self, begin: &str) -> Result<()> {
        match self {
            Conn::Sqlite(_) => self.execute(begin, Params::Positional(Vec::new())).map(drop),
            Conn::Postgres(client) => client.begin(begin),
        }
    }

    pub fn commit(&self) -> Result<()> {
        self.end("COMMIT")
    }

    pub fn rollback(&self) -> Result<()> {
        self.end("ROLLBACK")
    }

    fn end(&self, statement: &str) -> Result<()> {
        match self {
            Conn::Sqlite(_) => self.execute(statement, Params::Positional(Vec::new())).map(drop),
            Conn::Postgres(client) => client.end(statement),
        }
    }

    /// The PostgreSQL client, for what only PostgreSQL has.
    pub fn postgres(&self) -> Option<&PgClient> {
        match self {
            Conn::Sqlite(_) => None,
            Conn::Postgres(client) => Some(client),
        }
    }

    /// Whether no transaction is open.
    pub fn is_autocommit(&self) -> bool {
        match self {
            Conn::Sqlite(conn) => conn.is_autocommit(),
            Conn::Postgres(client) => !client.in_transaction(),
        }
    }
}

fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or_default()
}

/// Positional parameters: `params![a, b]` binds `?1`, `?2`.
macro_rules! params {
    () => { $crate::db::Params::Positional(Vec::new()) };
    ($($value:expr),+ $(,)?) => {
        $crate::db::Params::Positional(vec![$($crate::db::Value::from($value)),+])
    };
}

/// Named parameters: `named![":now" => t]` binds `:now`.
macro_rules! named {
    ($($name:literal => $value:expr),+ $(,)?) => {
        $crate::db::Params::Named(vec![$(($name, $crate::db::Value::from($value))),+])
    };
}

pub(crate) use {named, params};
