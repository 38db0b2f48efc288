//! `.indexignore`: gitignore-style patterns, relative to the directory holding the file.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, Clone)]
struct Pattern {
    negated: bool,
    dir_only: bool,
    /// The pattern has a `/` before its end: it matches the whole relative path, not a base name.
    anchored: bool,
    segments: Vec<String>,
}

/// The patterns of one `.indexignore` file.
#[derive(Debug, Clone)]
pub(crate) struct IgnoreRules {
    base: PathBuf,
    patterns: Vec<Pattern>,
}

impl IgnoreRules {
    /// Parses the patterns of the `.indexignore` in `base` (relative to the catalog root).
    pub(crate) fn parse(base: &Path, text: &str) -> IgnoreRules {
        let mut patterns = Vec::new();
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negated, line) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, line.strip_prefix('\\').unwrap_or(line)),
            };
            let (dir_only, line) = match line.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let anchored = line.contains('/');
            let line = line.trim_start_matches('/');
            if line.is_empty() {
                continue;
            }
            let segments = line.split('/').map(str::to_string).collect();
            patterns.push(Pattern {
                negated,
                dir_only,
                anchored,
                segments,
            });
        }
        IgnoreRules {
            base: base.to_path_buf(),
            patterns,
        }
    }

    /// `Some(true)` if the last matching pattern ignores `rel` (relative to the catalog root),
    /// `Some(false)` if it re-includes it, `None` if no pattern matches.
    pub(crate) fn matches(&self, rel: &Path, is_dir: bool) -> Option<bool> {
        let inner = rel.strip_prefix(&self.base).ok()?;
        let parts: Vec<String> = inner
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        if parts.is_empty() {
            return None;
        }
        let mut result = None;
        for p in &self.patterns {
            if p.dir_only && !is_dir {
                continue;
            }
            let hit = if p.anchored || p.segments.len() > 1 {
                match_segments(&p.segments, &parts)
            } else {
                parts
                    .last()
                    .is_some_and(|name| glob(p.segments[0].as_bytes(), name.as_bytes()))
            };
            if hit {
                result = Some(!p.negated);
            }
        }
        result
    }
}

fn match_segments(pattern: &[String], path: &[String]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| match_segments(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((name, path_rest)) => {
                glob(first.as_bytes(), name.as_bytes()) && match_segments(rest, path_rest)
            }
            None => false,
        },
    }
}

/// One path segment against a glob: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`, `\` escapes.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| glob(rest, &name[i..])),
        Some((b'?', rest)) => !name.is_empty() && glob(rest, &name[1..]),
        Some((b'[', rest)) => {
            let Some((&c, name_rest)) = name.split_first() else {
                return false;
            };
            let Some(close) = rest.iter().skip(1).position(|&b| b == b']').map(|i| i + 1) else {
                return c == b'[' && glob(rest, name_rest);
            };
            let (class, after) = (&rest[..close], &rest[close + 1..]);
            let (negate, class) = match class.split_first() {
                Some((b'!' | b'^', tail)) => (true, tail),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != negate && glob(after, name_rest)
        }
        Some((b'\\', rest)) if !rest.is_empty() => {
            name.first() == rest.first() && glob(&rest[1..], &name[1..])
        }
        Some((&p, rest)) => name.first() == Some(&p) && glob(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_patterns() {
        let rules = IgnoreRules::parse(
            Path::new("pkg"),
            "# comment\n*.md\n/docs/\nsub/**/x.json\n!keep.md\n",
        );
        assert_eq!(rules.matches(Path::new("pkg/README.md"), false), Some(true));
        assert_eq!(rules.matches(Path::new("pkg/a/b/c.md"), false), Some(true));
        assert_eq!(rules.matches(Path::new("pkg/keep.md"), false), Some(false));
        assert_eq!(rules.matches(Path::new("pkg/docs"), true), Some(true));
        assert_eq!(rules.matches(Path::new("pkg/docs"), false), None);
        assert_eq!(rules.matches(Path::new("pkg/sub/a/b/x.json"), false), Some(true));
        assert_eq!(rules.matches(Path::new("pkg/catalog.yaml"), false), None);
        assert_eq!(rules.matches(Path::new("other/README.md"), false), None);
        assert!(glob(b"[a-c]?.y*", b"b1.yaml"));
    }
}
