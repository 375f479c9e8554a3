//! File-name patterns: comma-separated globs (`*` any run of characters but `/`, `?` one such
//! character). A glob with a `/` matches the whole path relative to the database directory;
//! one without matches the file's base name, in any directory. A glob starting with `!`
//! excludes: a name matches a list when it matches some plain glob and no `!` glob.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternList {
    include: Vec<String>,
    exclude: Vec<String>,
}

impl PatternList {
    /// Parses `a,b,!c`. Empty items are refused (a stray comma is a typo, not a wildcard).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut list = PatternList {
            include: Vec::new(),
            exclude: Vec::new(),
        };
        for item in spec.split(',') {
            let item = item.trim();
            let (glob, into) = match item.strip_prefix('!') {
                Some(g) => (g, &mut list.exclude),
                None => (item, &mut list.include),
            };
            if glob.is_empty() {
                return Err(format!("empty pattern in {spec:?}"));
            }
            if glob.starts_with('/') || glob.split('/').any(|c| c == "..") {
                return Err(format!(
                    "pattern {glob:?} must be relative to the database directory, without '..'"
                ));
            }
            into.push(glob.to_string());
        }
        Ok(list)
    }

    /// Does `rel_path` (relative to the database directory, `/`-separated) match?
    pub fn matches(&self, rel_path: &str) -> bool {
        let hit = |g: &String| glob_matches(g, subject(g, rel_path));
        self.include.iter().any(hit) && !self.exclude.iter().any(hit)
    }
}

fn subject<'a>(glob: &str, rel_path: &'a str) -> &'a str {
    if glob.contains('/') {
        rel_path
    } else {
        rel_path.rsplit('/').next().unwrap_or(rel_path)
    }
}

/// Iterative glob match with one backtrack point (linear in practice, no recursion).
fn glob_matches(glob: &str, name: &str) -> bool {
    let (g, n) = (glob.as_bytes(), name.as_bytes());
    let (mut gi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some(b'*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if (c == b'?' && n[ni] != b'/') || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                // `*` never swallows a `/`.
                Some((sg, sn)) if n[sn] != b'/' => {
                    star = Some((sg, sn + 1));
                    gi = sg + 1;
                    ni = sn + 1;
                }
                _ => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> PatternList {
        PatternList::parse(s).unwrap()
    }

    #[test]
    fn globs_match_base_names_or_whole_paths() {
        let l = list("collection-*.wt");
        assert!(l.matches("collection-7-123.wt"));
        assert!(l.matches("db/collection-7-123.wt")); // directoryPerDB
        assert!(!l.matches("index-7-123.wt"));
        assert!(!l.matches("collection-7.wt.bak"));
        let j = list("journal/WiredTigerLog.*");
        assert!(j.matches("journal/WiredTigerLog.0000000001"));
        assert!(!j.matches("WiredTigerLog.0000000001"));
        assert!(!j.matches("x/journal/WiredTigerLog.1"));
        assert!(
            list("*").matches("a/b"),
            "a glob without '/' sees the base name"
        );
        assert!(!list("a*").matches("a/b"));
        assert!(list("j/*").matches("j/x") && !list("j/*").matches("j/x/y"));
        assert!(list("?.wt").matches("a.wt") && !list("?.wt").matches("ab.wt"));
        assert!(list("*a*b*").matches("xxaxxbxx") && !list("*a*b*").matches("xxbxxaxx"));
    }

    #[test]
    fn exclusions_and_bad_lists() {
        let l = list("*.wt, !WiredTiger.wt");
        assert!(l.matches("WiredTigerHS.wt") && l.matches("docs.wt"));
        assert!(!l.matches("WiredTiger.wt"));
        assert!(!list("!x").matches("y"), "no include matches nothing");
        for bad in ["", "a,,b", "!", "/abs/*.wt", "../x"] {
            assert!(PatternList::parse(bad).is_err(), "{bad:?}");
        }
    }
}
