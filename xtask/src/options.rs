//! What `cargo xtask bench` was asked to run.

use anyhow::{bail, Context, Result};

/// What `bench` was asked to run.
#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    pub quick: bool,
    /// One workload letter, `a`..`e`, `g`, `h`, `i`, `j`, `k`, `m`, `p` or `s`.
    pub only: Option<char>,
}

impl BenchOptions {
    pub fn parse(args: &[String]) -> Result<BenchOptions> {
        let mut options = BenchOptions::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--only" => {
                    let name =
                        args.next().context("--only needs a workload name (a..e, g, h, i, j, k, m, p, s)")?;
                    options.only = Some(parse_workload(name)?);
                }
                other => match other.strip_prefix("--only=") {
                    Some(name) => options.only = Some(parse_workload(name)?),
                    None => {
                        bail!("unknown bench option '{other}' (see `cargo xtask bench --help`)")
                    }
                },
            }
        }
        Ok(options)
    }

    /// Whether workload `name` is selected.
    pub fn runs(&self, name: char) -> bool {
        self.only.is_none_or(|only| only == name)
    }
}

fn parse_workload(name: &str) -> Result<char> {
    match name.to_ascii_lowercase().as_str() {
        "a" => Ok('a'),
        "b" => Ok('b'),
        "c" => Ok('c'),
        "d" => Ok('d'),
        "e" | "f" | "e/f" | "ef" => Ok('e'),
        "g" => Ok('g'),
        "h" => Ok('h'),
        "i" => Ok('i'),
        "j" => Ok('j'),
        "k" => Ok('k'),
        "m" => Ok('m'),
        "p" => Ok('p'),
        "s" => Ok('s'),
        "q" => Ok('q'),
        _ => bail!("unknown workload '{name}': choose a, b, c, d, e, g, h, i, j, k, m, p, q or s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<BenchOptions> {
        BenchOptions::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn bench_options() {
        let o = parse(&["--quick", "--only", "d"]).unwrap();
        assert!(o.quick);
        assert!(o.runs('d') && !o.runs('a'));
        assert_eq!(parse(&["--only=f"]).unwrap().only, Some('e'));
        assert!(parse(&["--only", "z"]).is_err());
        assert!(parse(&["--fast"]).is_err());
        assert!(parse(&[]).unwrap().runs('a'));
    }
}
