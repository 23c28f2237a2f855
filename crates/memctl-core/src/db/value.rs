//! Values crossing the seam: parameters ([`Value`]) and column values ([`ValueRef`]), in the
//! five storage classes both databases agree on (SQLite's; PostgreSQL's columns map onto them).

use crate::error::{Error, Result};
use std::borrow::Cow;
use std::sync::Arc;

/// A parameter value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(Cow<'a, str>),
    Blob(Cow<'a, [u8]>),
}

/// A statement's parameters, by position (`?1`) or by name (`:now`).
#[derive(Debug, Clone)]
pub(crate) enum Params<'a> {
    Positional(Vec<Value<'a>>),
    Named(Vec<(&'static str, Value<'a>)>),
}

impl Params<'_> {
    /// The parameters, unless a text among them holds NUL (U+0000), which PostgreSQL cannot
    /// store: new text never does (see `Store::redacted`), but an SQLite database an earlier
    /// memctl wrote may, and its migration says so.
    pub(super) fn without_nul(self) -> crate::error::Result<Self> {
        let values: Box<dyn Iterator<Item = &Value<'_>>> = match &self {
            Params::Positional(values) => Box::new(values.iter()),
            Params::Named(values) => Box::new(values.iter().map(|(_, value)| value)),
        };
        for value in values {
            if matches!(value, Value::Text(text) if text.contains('\0')) {
                return Err(crate::error::Error::invalid(
                    "text holds the NUL character (U+0000), which PostgreSQL cannot store",
                ));
            }
        }
        Ok(self)
    }
}

impl<'a, T: Into<Value<'a>>, const N: usize> From<[T; N]> for Params<'a> {
    fn from(values: [T; N]) -> Self {
        Params::Positional(values.into_iter().map(Into::into).collect())
    }
}

/// rusqlite's form of named parameters.
pub(super) fn named<'v>(
    values: &'v [(&'static str, Value<'_>)],
) -> Vec<(&'static str, &'v dyn rusqlite::ToSql)> {
    values.iter().map(|(name, value)| (*name, value as &dyn rusqlite::ToSql)).collect()
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value<'_> {
            fn from(v: $t) -> Self {
                Value::Int(v as i64)
            }
        }
    )*};
}
from_int!(i64, i32, u32, u8, usize, u16);

impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(Cow::Borrowed(v))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(Cow::Borrowed(v))
    }
}

impl From<String> for Value<'_> {
    fn from(v: String) -> Self {
        Value::Text(Cow::Owned(v))
    }
}

impl<'a> From<&'a [u8]> for Value<'a> {
    fn from(v: &'a [u8]) -> Self {
        Value::Blob(Cow::Borrowed(v))
    }
}

impl<'a> From<&'a Vec<u8>> for Value<'a> {
    fn from(v: &'a Vec<u8>) -> Self {
        Value::Blob(Cow::Borrowed(v))
    }
}

impl From<Vec<u8>> for Value<'_> {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(Cow::Owned(v))
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Value<'a> {
    fn from(v: &'a [u8; N]) -> Self {
        Value::Blob(Cow::Borrowed(v))
    }
}

impl<const N: usize> From<[u8; N]> for Value<'_> {
    fn from(v: [u8; N]) -> Self {
        Value::Blob(Cow::Owned(v.to_vec()))
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl<'a> From<&'a Option<String>> for Value<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().into()
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef as Sql};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => Sql::Null,
            Value::Int(v) => Sql::Integer(*v),
            Value::Real(v) => Sql::Real(*v),
            Value::Text(v) => Sql::Text(v.as_bytes()),
            Value::Blob(v) => Sql::Blob(v),
        }))
    }
}

/// A column value as read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ValueRef<'r> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'r str),
    Blob(&'r [u8]),
}

impl<'r> From<rusqlite::types::ValueRef<'r>> for ValueRef<'r> {
    fn from(v: rusqlite::types::ValueRef<'r>) -> Self {
        use rusqlite::types::ValueRef as Sql;
        match v {
            Sql::Null => ValueRef::Null,
            Sql::Integer(v) => ValueRef::Int(v),
            Sql::Real(v) => ValueRef::Real(v),
            // Every text memctl stores is UTF-8; a foreign byte sequence reads as a blob.
            Sql::Text(v) => std::str::from_utf8(v).map_or(ValueRef::Blob(v), ValueRef::Text),
            Sql::Blob(v) => ValueRef::Blob(v),
        }
    }
}

impl<'r> ValueRef<'r> {
    fn kind(&self) -> &'static str {
        match self {
            ValueRef::Null => "NULL",
            ValueRef::Int(_) => "an integer",
            ValueRef::Real(_) => "a real",
            ValueRef::Text(_) => "text",
            ValueRef::Blob(_) => "a blob",
        }
    }

    pub(super) fn mismatch(&self, wanted: &str) -> Error {
        Error::internal(format!("expected {wanted}, found {}", self.kind()))
    }

    /// The value, owned (to bind it elsewhere).
    pub fn to_value(self) -> Value<'static> {
        match self {
            ValueRef::Null => Value::Null,
            ValueRef::Int(v) => Value::Int(v),
            ValueRef::Real(v) => Value::Real(v),
            ValueRef::Text(v) => Value::from(v.to_string()),
            ValueRef::Blob(v) => Value::from(v.to_vec()),
        }
    }

    pub fn as_str(&self) -> Result<&'r str> {
        match *self {
            ValueRef::Text(v) => Ok(v),
            _ => Err(self.mismatch("text")),
        }
    }
}

/// A Rust type a column converts to.
pub(crate) trait FromValue: Sized {
    fn from_value(value: ValueRef<'_>) -> Result<Self>;
}

impl FromValue for i64 {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        match value {
            ValueRef::Int(v) => Ok(v),
            _ => Err(value.mismatch("an integer")),
        }
    }
}

macro_rules! from_value_int {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(value: ValueRef<'_>) -> Result<Self> {
                let v = i64::from_value(value)?;
                <$t>::try_from(v).map_err(|_| Error::internal(format!("{v} is out of range")))
            }
        }
    )*};
}
from_value_int!(i32, u32, u8, usize);

impl FromValue for bool {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        Ok(i64::from_value(value)? != 0)
    }
}

impl FromValue for f64 {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        match value {
            ValueRef::Real(v) => Ok(v),
            ValueRef::Int(v) => Ok(v as f64),
            _ => Err(value.mismatch("a number")),
        }
    }
}

impl FromValue for String {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        Ok(value.as_str()?.to_owned())
    }
}

impl FromValue for Arc<str> {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        Ok(value.as_str()?.into())
    }
}

impl FromValue for Vec<u8> {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        match value {
            ValueRef::Blob(v) => Ok(v.to_vec()),
            _ => Err(value.mismatch("a blob")),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: ValueRef<'_>) -> Result<Self> {
        match value {
            ValueRef::Null => Ok(None),
            value => T::from_value(value).map(Some),
        }
    }
}
