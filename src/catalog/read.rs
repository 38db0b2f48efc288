//! Reading FBC metas: from a directory tree (YAML multi-document and JSON streams, `.indexignore`),
//! from a JSON/YAML stream, and from JSONL as catalogd serves it; and writing JSONL back.

use std::{
    io::{self, BufRead, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;

use super::{CatalogError, Meta, ignore::IgnoreRules};
use crate::confined::{ConfinedDir, Kind};

/// Name of the per-directory ignore file (gitignore syntax), itself never read as FBC.
pub const INDEX_IGNORE_FILE: &str = ".indexignore";

/// The default largest catalog file read (catalogd's `--max-file-bytes` changes it).
pub const DEFAULT_MAX_FILE_BYTES: u64 = crate::image::UnpackLimits::CATALOG.max_file_bytes;
const MAX_INDEX_IGNORE_BYTES: u64 = 1 << 20;

/// Lists the FBC files of a directory tree in the order catalogd walks them (lexical, depth
/// first), leaving out `.indexignore` files and what they ignore.
pub fn list_fbc_files(root: &Path) -> Result<Vec<PathBuf>, CatalogError> {
    let confined = ConfinedDir::open(root)?;
    Ok(list_relative(&confined)?
        .into_iter()
        .map(|rel| root.join(rel))
        .collect())
}

/// The FBC files below `root`, relative to it. Nothing is followed: a symbolic link is listed
/// as a file (as fs.WalkDir does) and refused when read.
fn list_relative(root: &ConfinedDir) -> Result<Vec<PathBuf>, CatalogError> {
    let mut files = Vec::new();
    let mut rules = Vec::new();
    walk(root, Path::new(""), &mut rules, &mut files)?;
    Ok(files)
}

fn walk(
    root: &ConfinedDir,
    rel_dir: &Path,
    rules: &mut Vec<IgnoreRules>,
    files: &mut Vec<PathBuf>,
) -> Result<(), CatalogError> {
    let dir = root.open_dir(rel_dir)?;
    let pushed = match dir.read_file(Path::new(INDEX_IGNORE_FILE), MAX_INDEX_IGNORE_BYTES) {
        Ok(bytes) => {
            rules.push(IgnoreRules::parse(rel_dir, &String::from_utf8_lossy(&bytes)));
            true
        }
        Err(e) if e.is_not_found() => false,
        Err(e) => return Err(e.into()),
    };
    for (name, kind) in dir.entries()? {
        if name == INDEX_IGNORE_FILE {
            continue;
        }
        let is_dir = kind == Kind::Dir;
        let rel = rel_dir.join(&name);
        if rules
            .iter()
            .rev()
            .find_map(|r| r.matches(&rel, is_dir))
            .unwrap_or(false)
        {
            continue;
        }
        if is_dir {
            walk(root, &rel, rules, files)?;
        } else {
            files.push(rel);
        }
    }
    if pushed {
        rules.pop();
    }
    Ok(())
}

/// Reads every meta of an FBC directory tree, file by file, in catalogd's order.
pub fn read_dir_metas(root: &Path) -> Result<Vec<Meta>, CatalogError> {
    let mut metas = Vec::new();
    for_each_dir_meta(root, |m| {
        metas.push(m);
        Ok(())
    })?;
    Ok(metas)
}

/// Streams the metas of an FBC directory tree to `f`, a few files in memory at a time, reading
/// no file over [`DEFAULT_MAX_FILE_BYTES`].
pub fn for_each_dir_meta(
    root: &Path,
    f: impl FnMut(Meta) -> Result<(), CatalogError>,
) -> Result<(), CatalogError> {
    for_each_dir_meta_within(root, DEFAULT_MAX_FILE_BYTES, f)
}

/// [`for_each_dir_meta`], reading no file larger than `max_file_bytes` (checked before the
/// file is read, so at most the batch's files of that size are held at once).
pub fn for_each_dir_meta_within(
    root: &Path,
    max_file_bytes: u64,
    mut f: impl FnMut(Meta) -> Result<(), CatalogError>,
) -> Result<(), CatalogError> {
    let root = &ConfinedDir::open(root)?;
    let files = list_relative(root)?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    // Files are parsed in parallel a small batch at a time and handed on in walk order, so
    // memory stays bounded by the batch while every core works.
    for batch in files.chunks(workers * 2) {
        let parsed: Vec<Result<Vec<Meta>, CatalogError>> = if workers == 1 || batch.len() == 1 {
            batch
                .iter()
                .map(|p| read_file_metas(root, p, max_file_bytes))
                .collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..workers)
                    .map(|w| {
                        scope.spawn(move || {
                            batch
                                .iter()
                                .enumerate()
                                .filter(|(i, _)| i % workers == w)
                                .map(|(i, p)| (i, read_file_metas(root, p, max_file_bytes)))
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                let mut slots: Vec<Option<Result<Vec<Meta>, CatalogError>>> =
                    (0..batch.len()).map(|_| None).collect();
                for h in handles {
                    // A panicking parser is a bug; report it as an error rather than crash.
                    for (i, r) in h.join().unwrap_or_default() {
                        slots[i] = Some(r);
                    }
                }
                slots
                    .into_iter()
                    .zip(batch)
                    .map(|(s, p)| {
                        s.unwrap_or_else(|| {
                            Err(CatalogError::Malformed {
                                location: p.display().to_string(),
                                message: "parser failed".to_string(),
                            })
                        })
                    })
                    .collect()
            })
        };
        for metas in parsed {
            for meta in metas? {
                f(meta)?;
            }
        }
    }
    Ok(())
}

fn read_file_metas(root: &ConfinedDir, rel: &Path, max_file_bytes: u64) -> Result<Vec<Meta>, CatalogError> {
    let data = root.read_file(rel, max_file_bytes)?;
    parse_stream(&data, Arc::from(root.path().join(rel).display().to_string()))
}

/// Parses one file's content: a stream of JSON values if it starts (after whitespace) with `{`,
/// else YAML documents separated by `---`. Empty documents are skipped.
pub fn parse_stream(data: &[u8], origin: Arc<str>) -> Result<Vec<Meta>, CatalogError> {
    let first = data.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        parse_json_stream(data, origin)
    } else {
        parse_yaml_stream(data, origin)
    }
}

fn parse_json_stream(data: &[u8], origin: Arc<str>) -> Result<Vec<Meta>, CatalogError> {
    let mut metas = Vec::new();
    let stream = serde_json::Deserializer::from_slice(data).into_iter::<serde_json::Value>();
    for (i, value) in stream.enumerate() {
        let position = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let value = value.map_err(|e| CatalogError::Malformed {
            location: format!("{origin}: object #{position}"),
            message: format!("invalid JSON: {e}"),
        })?;
        metas.push(Meta::from_value(&value, origin.clone(), position)?);
    }
    Ok(metas)
}

fn yaml_options(input_len: usize) -> serde_saphyr::Options {
    // Limits scale with the input so large catalogs load while hostile input stays bounded.
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(input_len.saturating_add(1)),
            max_events: input_len.saturating_add(1_000),
            max_documents: input_len / 4 + 1_000,
            max_nodes: input_len.saturating_add(1_000),
            max_total_scalar_bytes: input_len.saturating_add(1_000),
        },
    }
}

fn parse_yaml_stream(data: &[u8], origin: Arc<str>) -> Result<Vec<Meta>, CatalogError> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_slice_multiple_with_options(data, yaml_options(data.len())).map_err(|e| {
            CatalogError::Malformed {
                location: origin.to_string(),
                message: format!("invalid YAML: {e}"),
            }
        })?;
    let mut metas = Vec::with_capacity(docs.len());
    let mut position = 0u32;
    for doc in docs.iter().filter(|d| !d.is_null()) {
        position += 1;
        metas.push(Meta::from_value(doc, origin.clone(), position)?);
    }
    Ok(metas)
}

/// Iterates the metas of a JSONL buffer (one JSON object per line, as catalogd serves
/// `/api/v1/all`). Each blob is a slice of `data`: nothing is copied. Blank lines are skipped.
pub fn jsonl_metas(data: Bytes, origin: Arc<str>) -> impl Iterator<Item = Result<Meta, CatalogError>> {
    let mut offset = 0usize;
    let mut line_number = 0u32;
    std::iter::from_fn(move || {
        loop {
            if offset >= data.len() {
                return None;
            }
            let rest = &data[offset..];
            let len = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            let line = data.slice(offset..offset + len);
            offset += len + 1;
            line_number = line_number.saturating_add(1);
            let trimmed = trim_ascii_whitespace(&line);
            if trimmed.is_empty() {
                continue;
            }
            return Some(Meta::from_json_object(trimmed, origin.clone(), line_number));
        }
    })
}

fn trim_ascii_whitespace(b: &Bytes) -> Bytes {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    b.slice(start..end.max(start))
}

/// Reads JSONL metas from a reader, one line at a time (for streams too large to buffer).
pub struct JsonlReader<R> {
    reader: R,
    origin: Arc<str>,
    line_number: u32,
    max_line_bytes: usize,
}

impl<R: BufRead> JsonlReader<R> {
    /// A reader whose lines may be at most `max_line_bytes` long (a bound against hostile input).
    pub fn new(reader: R, origin: Arc<str>, max_line_bytes: usize) -> Self {
        JsonlReader {
            reader,
            origin,
            line_number: 0,
            max_line_bytes,
        }
    }
}

impl<R: BufRead> Iterator for JsonlReader<R> {
    type Item = Result<Meta, CatalogError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let mut line = Vec::new();
            let limit = u64::try_from(self.max_line_bytes)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            match <&mut R as io::Read>::take(&mut self.reader, limit).read_until(b'\n', &mut line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    return Some(Err(CatalogError::Io {
                        path: self.origin.to_string(),
                        source: Arc::new(e),
                    }));
                }
            }
            self.line_number = self.line_number.saturating_add(1);
            if line.len() > self.max_line_bytes && line.last() != Some(&b'\n') {
                return Some(Err(CatalogError::Malformed {
                    location: format!("{}: object #{}", self.origin, self.line_number),
                    message: format!("line longer than {} bytes", self.max_line_bytes),
                }));
            }
            let line = trim_ascii_whitespace(&Bytes::from(line));
            if line.is_empty() {
                continue;
            }
            return Some(Meta::from_json_object(
                line,
                self.origin.clone(),
                self.line_number,
            ));
        }
    }
}

/// Writes metas as JSONL: each blob on its own line, as catalogd's `catalog.jsonl`.
pub fn write_jsonl<'a, W: Write>(mut out: W, metas: impl IntoIterator<Item = &'a Meta>) -> io::Result<()> {
    for meta in metas {
        out.write_all(&meta.blob)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn yaml_and_json_streams_become_the_same_normalised_blobs() {
        let yaml = b"---\nschema: olm.package\nname: foo\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: foo\nname: stable\nentries:\n- name: foo.v1\n";
        let json = b" {\"schema\":\"olm.package\",\"name\":\"foo\",\"defaultChannel\":\"stable\"}\n{\"entries\":[{\"name\":\"foo.v1\"}],\n \"name\":\"stable\",\"package\":\"foo\",\"schema\":\"olm.channel\"}";
        let a = parse_stream(yaml, Arc::from("a.yaml")).unwrap();
        let b = parse_stream(json, Arc::from("b.json")).unwrap();
        assert_eq!(a.len(), 2);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.blob, y.blob);
        }
        assert_eq!(
            &a[0].blob[..],
            br#"{"defaultChannel":"stable","name":"foo","schema":"olm.package"}"#
        );
    }

    #[test]
    fn jsonl_round_trips() {
        let text = "{\"name\":\"foo\",\"schema\":\"olm.package\"}\n\n{\"name\":\"b\",\"package\":\"foo\",\"schema\":\"olm.bundle\"}\n";
        let metas: Vec<Meta> = jsonl_metas(Bytes::from(text), Arc::from("all"))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(metas.len(), 2);
        assert_eq!(metas[1].position, 3);
        let mut out = Vec::new();
        write_jsonl(&mut out, &metas).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), text.replace("\n\n", "\n"));
        let streamed: Vec<Meta> = JsonlReader::new(text.as_bytes(), Arc::from("all"), 1 << 20)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(streamed, metas);
    }

    #[test]
    fn directory_walk_is_lexical_honours_indexignore_and_does_not_follow_symlinked_dirs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("b/docs")).unwrap();
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join(".indexignore"), "*.md\n").unwrap();
        fs::write(root.join("b/.indexignore"), "docs/\n").unwrap();
        fs::write(root.join("README.md"), "not fbc").unwrap();
        fs::write(root.join("b/docs/x.yaml"), "not: fbc").unwrap();
        fs::write(root.join("b/catalog.yaml"), "schema: olm.package\nname: b\n").unwrap();
        fs::write(
            root.join("a/catalog.json"),
            r#"{"schema":"olm.package","name":"a"}"#,
        )
        .unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root, root.join("a/loop")).unwrap();
        let files: Vec<String> = list_fbc_files(root)
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        #[cfg(unix)]
        assert_eq!(files, ["a/catalog.json", "a/loop", "b/catalog.yaml"]);
        // The symlinked directory is read as a file and fails with an error naming it.
        #[cfg(unix)]
        assert!(read_dir_metas(root).unwrap_err().to_string().contains("a/loop"));
        #[cfg(unix)]
        fs::remove_file(root.join("a/loop")).unwrap();
        let names: Vec<String> = read_dir_metas(root)
            .unwrap()
            .iter()
            .map(|m| m.name.to_string())
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn malformed_input_names_file_and_object() {
        let err = parse_stream(
            b"---\nschema: olm.package\nname: a\n---\n- 1\n",
            Arc::from("pkg/catalog.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("pkg/catalog.yaml: object #2"), "{err}");
        let err = jsonl_metas(
            Bytes::from_static(b"{\"schema\":\"x\"}\n{oops\n"),
            Arc::from("all"),
        )
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err()
        .to_string();
        assert!(err.contains("all: object #2"), "{err}");
    }
}

/// Property tests: whatever the bytes, JSON or YAML, reading a catalog file or a JSONL stream
/// answers metas or an error, never a panic.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Arbitrary JSON values, FBC-shaped now and then (a `schema` key) so that decoding goes past
    /// the first check.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            "\\PC{0,12}".prop_map(serde_json::Value::from),
            prop_oneof![
                Just("olm.package"),
                Just("olm.channel"),
                Just("olm.bundle"),
                Just("olm.deprecations")
            ]
            .prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("schema".to_string()),
                        Just("name".to_string()),
                        Just("package".to_string()),
                        Just("entries".to_string()),
                        Just("properties".to_string()),
                        "[a-z]{1,8}",
                    ],
                    inner,
                    0..6,
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = parse_stream(&data, Arc::from("random"));
            let _ = jsonl_metas(Bytes::from(data.clone()), Arc::from("random")).count();
            let _ = JsonlReader::new(&data[..], Arc::from("random"), 64).count();
        }

        #[test]
        fn random_json_documents_never_panic(docs in proptest::collection::vec(json_value(), 0..4)) {
            let json: Vec<u8> = docs
                .iter()
                .flat_map(|d| serde_json::to_vec(d).unwrap().into_iter().chain([b'\n']))
                .collect();
            let _ = parse_stream(&json, Arc::from("random.json"));
            let _ = jsonl_metas(Bytes::from(json.clone()), Arc::from("random.jsonl")).count();
            let _ = JsonlReader::new(&json[..], Arc::from("random.jsonl"), 1 << 20).count();
        }

        #[test]
        fn random_yaml_documents_never_panic(docs in proptest::collection::vec(json_value(), 0..4)) {
            let yaml: String = docs
                .iter()
                .map(|d| format!("---\n{}", serde_saphyr::to_string(d).unwrap_or_default()))
                .collect();
            let _ = parse_stream(yaml.as_bytes(), Arc::from("random.yaml"));
        }

        #[test]
        fn random_yaml_text_never_panics(text in "[a-z:{}\\[\\]\\-#&*!|>'\" \n\t0-9.,]{0,200}") {
            let _ = parse_stream(text.as_bytes(), Arc::from("random.yaml"));
        }
    }
}
