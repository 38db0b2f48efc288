//! Safe application of image layers (tar, gzip-compressed or not) onto a directory.
//!
//! Layers are untrusted. Every write, link and deletion goes through a [`ConfinedDir`] of the
//! root, which walks paths one component at a time without following any symbolic link, so no
//! chain of links, whiteout or later entry can reach outside the root. Entry names with `..` or a
//! leading `/` are refused; writing through a symbolic link is refused; symbolic links are
//! stored as they are and never followed (readers refuse them); hard links must name a regular
//! file of the image; devices, FIFOs and sockets are skipped. Whiteouts (`.wh.<name>`,
//! `.wh..wh..opq`) delete what earlier layers created, resolved inside the root when they are
//! applied. Bounded: the uncompressed stream (a lying gzip bomb stops at the cap), the content
//! written, the number of entries, and the tar metadata (PAX, GNU long names) read between two
//! entries, which the tar reader would otherwise hold whole in memory.

use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use tar::EntryType;

use crate::confined::{ConfinedDir, ConfinedError, Kind};

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";
// Headroom for tar headers, padding and PAX records over the file-content budget.
const STREAM_OVERHEAD_BYTES: u64 = 64 << 20;
/// The most tar metadata (headers, PAX records, GNU long names) read between two entries.
pub const MAX_ENTRY_METADATA_BYTES: u64 = 1 << 20;

/// Bounds on what unpacking an image may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Total bytes of file content over all layers.
    pub max_total_bytes: u64,
    /// Total number of tar entries over all layers.
    pub max_entries: u64,
    /// The largest single file the readers of the unpacked content read (bundle manifests,
    /// catalog files): checked before a byte is allocated. Unpacking itself bounds only the
    /// total, since the base layers of catalog images may hold larger files nobody reads.
    pub max_file_bytes: u64,
}

impl UnpackLimits {
    /// Bundle images: the largest real bundle object is about 1.3 MB and whole bundles a few MB.
    pub const BUNDLE: UnpackLimits = UnpackLimits {
        max_total_bytes: 64 << 20,
        max_entries: 10_000,
        max_file_bytes: 16 << 20,
    };
    /// Catalog images: the largest shared catalog is about 52 MB, its largest file 4 MB (one
    /// package); whole product indexes (with their base image) run to a few hundred MB, and
    /// keep one file per package.
    pub const CATALOG: UnpackLimits = UnpackLimits {
        max_total_bytes: 1 << 30,
        max_entries: 200_000,
        max_file_bytes: 256 << 20,
    };
}

/// What a bundle image may hold and what is read from it, as command-line flags (defaults:
/// [`UnpackLimits::BUNDLE`]).
#[derive(clap::Args, Debug, Clone)]
pub struct BundleLimitArgs {
    /// Largest total uncompressed size of a bundle image, in bytes.
    #[arg(long, env = "OLMV1_MAX_UNPACKED_BYTES", default_value_t = UnpackLimits::BUNDLE.max_total_bytes)]
    pub max_unpacked_bytes: u64,
    /// Largest number of tar entries over the layers of a bundle image.
    #[arg(long, env = "OLMV1_MAX_UNPACKED_ENTRIES", default_value_t = UnpackLimits::BUNDLE.max_entries)]
    pub max_unpacked_entries: u64,
    /// Largest single bundle file (manifest, metadata) read, in bytes (checked before it is read).
    #[arg(long, env = "OLMV1_MAX_FILE_BYTES", default_value_t = UnpackLimits::BUNDLE.max_file_bytes)]
    pub max_file_bytes: u64,
}

impl BundleLimitArgs {
    /// The limits these flags describe.
    pub fn limits(&self) -> UnpackLimits {
        UnpackLimits {
            max_total_bytes: self.max_unpacked_bytes,
            max_entries: self.max_unpacked_entries,
            max_file_bytes: self.max_file_bytes,
        }
    }
}

/// Running totals while applying the layers of one image.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnpackTotals {
    /// Bytes of file content written.
    pub bytes: u64,
    /// Entries read.
    pub entries: u64,
}

/// Why a layer could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    /// An entry's path leaves the root or is absolute.
    #[error("entry {entry:?} escapes the unpack root")]
    PathEscapes {
        /// The entry's path as written in the archive.
        entry: String,
    },
    /// An entry would be written through a symbolic link.
    #[error("entry {entry:?} would be written through the symbolic link {link:?}")]
    ThroughSymlink {
        /// The entry's path.
        entry: String,
        /// The symbolic link on its way.
        link: String,
    },
    /// A hard link targets something that is not a regular file of this image.
    #[error("hard link {entry:?} targets {target:?}, which is not a regular file in the image")]
    BadHardlink {
        /// The link's path.
        entry: String,
        /// Its target.
        target: String,
    },
    /// A whiteout names something invalid.
    #[error("invalid whiteout {entry:?}")]
    InvalidWhiteout {
        /// The whiteout entry.
        entry: String,
    },
    /// The content exceeds [`UnpackLimits::max_total_bytes`].
    #[error("uncompressed content exceeds the limit of {limit} bytes (decompression bomb?)")]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The archive holds more than [`UnpackLimits::max_entries`] entries.
    #[error("archive holds more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: u64,
    },
    /// PAX records or GNU long names larger than any real path or attribute.
    #[error("tar metadata of one entry (PAX records, long names) exceeds {limit} bytes")]
    MetadataTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The layer is compressed with an algorithm this build cannot read.
    #[error("layer is compressed with {0}, which is not supported (gzip or uncompressed tar only)")]
    UnsupportedCompression(&'static str),
    /// The archive is truncated or malformed.
    #[error("reading the archive: {0}")]
    Read(#[source] io::Error),
    /// Writing to the target directory failed.
    #[error("writing entry {entry:?}: {source}")]
    Write {
        /// The entry being applied.
        entry: String,
        /// The cause.
        #[source]
        source: ConfinedError,
    },
}

/// Applies one layer (gzip or plain tar, sniffed from its first bytes) onto `root`.
pub fn apply_layer(
    root: &Path,
    layer: impl Read,
    limits: &UnpackLimits,
    totals: &mut UnpackTotals,
) -> Result<(), UnpackError> {
    let mut buffered = BufReader::with_capacity(64 * 1024, layer);
    let head = buffered.fill_buf().map_err(UnpackError::Read)?;
    let budget = limits
        .max_total_bytes
        .saturating_sub(totals.bytes)
        .saturating_add(STREAM_OVERHEAD_BYTES);
    let decompressed: Box<dyn Read> = if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(buffered))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(UnpackError::UnsupportedCompression("zstd"));
    } else if head.starts_with(b"BZh") {
        return Err(UnpackError::UnsupportedCompression("bzip2"));
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        return Err(UnpackError::UnsupportedCompression("xz"));
    } else {
        Box::new(buffered)
    };
    let metadata_read = Rc::new(Cell::new(None));
    let capped = CappedReader {
        inner: decompressed,
        remaining: budget,
        limit: limits.max_total_bytes,
        metadata_read: metadata_read.clone(),
    };
    let dir = ConfinedDir::open(root).map_err(|source| UnpackError::Write {
        entry: String::new(),
        source,
    })?;
    apply_tar(&dir, capped, &metadata_read, limits, totals)
}

/// A reader that fails once more than `remaining` bytes were read (a gzip bomb stops here even
/// when its tar headers lie), or once more than [`MAX_ENTRY_METADATA_BYTES`] were read while
/// the tar reader looks for the next entry (`metadata_read` is `Some` then).
struct CappedReader<R> {
    inner: R,
    remaining: u64,
    limit: u64,
    metadata_read: Rc<Cell<Option<u64>>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.remaining {
            return Err(io::Error::other(UnpackError::TooLarge { limit: self.limit }));
        }
        self.remaining -= n as u64;
        if let Some(read) = self.metadata_read.get() {
            let read = read + n as u64;
            if read > MAX_ENTRY_METADATA_BYTES {
                return Err(io::Error::other(UnpackError::MetadataTooLarge {
                    limit: MAX_ENTRY_METADATA_BYTES,
                }));
            }
            self.metadata_read.set(Some(read));
        }
        Ok(n)
    }
}

fn apply_tar(
    root: &ConfinedDir,
    reader: impl Read,
    metadata_read: &Cell<Option<u64>>,
    limits: &UnpackLimits,
    totals: &mut UnpackTotals,
) -> Result<(), UnpackError> {
    let mut archive = tar::Archive::new(reader);
    let mut created_in_layer: HashSet<PathBuf> = HashSet::new();
    let mut opaque_dirs: Vec<(PathBuf, String)> = Vec::new();
    let mut entries = archive.entries().map_err(read_error)?;
    loop {
        // What the tar reader consumes to find the next entry (skipped data, headers, PAX
        // records, long names) is metered: it holds long names and PAX records in memory.
        metadata_read.set(Some(0));
        let next = entries.next();
        metadata_read.set(None);
        let Some(entry) = next else { break };
        let mut entry = entry.map_err(read_error)?;
        totals.entries += 1;
        if totals.entries > limits.max_entries {
            return Err(UnpackError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let raw_path = entry.path().map_err(read_error)?.into_owned();
        let shown = raw_path.display().to_string();
        let Some(rel) =
            clean_relative(&raw_path).ok_or_else(|| UnpackError::PathEscapes { entry: shown.clone() })?
        else {
            continue; // the root itself
        };
        let Some(name) = rel.file_name().map(OsStr::to_os_string) else {
            continue;
        };
        let parent_rel = rel.parent().map(Path::to_path_buf).unwrap_or_default();
        let write_error = |source: ConfinedError| match source {
            ConfinedError::Symlink { path } => UnpackError::ThroughSymlink {
                entry: shown.clone(),
                link: path
                    .strip_prefix(root.path())
                    .unwrap_or(&path)
                    .display()
                    .to_string(),
            },
            source => UnpackError::Write {
                entry: shown.clone(),
                source,
            },
        };

        if name == OPAQUE_WHITEOUT {
            opaque_dirs.push((parent_rel, shown.clone()));
            continue;
        }
        if let Some(hidden) = name.to_str().and_then(|n| n.strip_prefix(WHITEOUT_PREFIX)) {
            if hidden.is_empty() || hidden == "." || hidden == ".." || hidden.contains('/') {
                return Err(UnpackError::InvalidWhiteout { entry: shown });
            }
            // Resolved inside the root now, at the moment of deletion; a link on the way is refused.
            match root.open_dir(&parent_rel) {
                Ok(parent) => parent.remove_all(OsStr::new(hidden)).map_err(write_error)?,
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(write_error(e)),
            }
            continue;
        }

        let entry_type = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o644);
        match entry_type {
            EntryType::Directory => {
                let parent = root.create_dir_all(&parent_rel).map_err(write_error)?;
                match parent.kind_of(&name).map_err(write_error)? {
                    Some(Kind::Dir) => {}
                    Some(_) => {
                        parent.remove_all(&name).map_err(write_error)?;
                        parent.create_dir(&name).map_err(write_error)?;
                    }
                    None => parent.create_dir(&name).map_err(write_error)?,
                }
                let dir = root.open_dir(&rel).map_err(write_error)?;
                dir.set_mode((mode & 0o777) | 0o700).map_err(write_error)?;
            }
            EntryType::Regular | EntryType::Continuous => {
                // The entry's size (a PAX `size` record wins over the header) is checked before
                // writing, and what is copied is capped at it by the tar reader.
                let size = entry.size();
                if totals.bytes.saturating_add(size) > limits.max_total_bytes {
                    return Err(UnpackError::TooLarge {
                        limit: limits.max_total_bytes,
                    });
                }
                let parent = root.create_dir_all(&parent_rel).map_err(write_error)?;
                parent.remove_all(&name).map_err(write_error)?;
                let mut file = parent
                    .create_file(&name, (mode & 0o777) | 0o600)
                    .map_err(write_error)?;
                let written = io::copy(&mut entry, &mut file).map_err(read_error)?;
                totals.bytes += written;
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(read_error)?
                    .unwrap_or_default()
                    .into_owned();
                let parent = root.create_dir_all(&parent_rel).map_err(write_error)?;
                parent.remove_all(&name).map_err(write_error)?;
                // Stored as written: nothing in this program follows a link in an image.
                parent.symlink(&name, &link).map_err(write_error)?;
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(read_error)?
                    .unwrap_or_default()
                    .into_owned();
                let bad = || UnpackError::BadHardlink {
                    entry: shown.clone(),
                    target: link.display().to_string(),
                };
                let source_rel = clean_relative(&link)
                    .ok_or_else(|| UnpackError::PathEscapes { entry: shown.clone() })?
                    .ok_or_else(bad)?;
                let (source_dir, source_name) = root.parent_and_name(&source_rel).map_err(|_| bad())?;
                if source_dir.kind_of(source_name).map_err(write_error)? != Some(Kind::File) {
                    return Err(bad());
                }
                if source_rel != rel {
                    let parent = root.create_dir_all(&parent_rel).map_err(write_error)?;
                    parent.remove_all(&name).map_err(write_error)?;
                    parent
                        .hard_link(&name, &source_dir, source_name)
                        .map_err(write_error)?;
                }
            }
            // Device files, FIFOs and unknown kinds have no place in catalogs or bundles.
            _ => {
                tracing::debug!(entry = %shown, kind = ?entry_type, "skipping special tar entry");
                continue;
            }
        }
        created_in_layer.insert(rel);
    }
    for (dir, shown) in opaque_dirs {
        clear_opaque_dir(root, &dir, &created_in_layer).map_err(|source| match source {
            ConfinedError::Symlink { path } => UnpackError::ThroughSymlink {
                entry: shown.clone(),
                link: path.display().to_string(),
            },
            source => UnpackError::Write { entry: shown, source },
        })?;
    }
    Ok(())
}

/// Normalises an archive path to a relative path: `None` (outer) when it escapes the root or is
/// absolute, `Some(None)` for the root itself.
fn clean_relative(raw: &Path) -> Option<Option<PathBuf>> {
    let mut clean = PathBuf::new();
    for component in raw.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(if clean.as_os_str().is_empty() {
        None
    } else {
        Some(clean)
    })
}

/// Deletes what earlier layers put in `dir` (the layer's own entries stay), resolving `dir`
/// inside the root now: if it became a link, that is refused rather than followed.
fn clear_opaque_dir(root: &ConfinedDir, dir: &Path, keep: &HashSet<PathBuf>) -> Result<(), ConfinedError> {
    let opened = match root.open_dir(dir) {
        Ok(opened) => opened,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e),
    };
    opened.clear(|name: &OsStr| keep.contains(&dir.join(OsString::from(name))))
}

/// Recovers a limit error raised inside the capped reader; anything else is a read error.
fn read_error(e: io::Error) -> UnpackError {
    if e.get_ref().is_some_and(|inner| inner.is::<UnpackError>()) {
        if let Some(inner) = e.into_inner()
            && let Ok(unpack) = inner.downcast::<UnpackError>()
        {
            return *unpack;
        }
        return UnpackError::Read(io::Error::other("archive error"));
    }
    UnpackError::Read(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn header(path: &str, kind: EntryType, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        // set_path refuses `..`; write the raw name bytes like a hostile tool would.
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        h
    }

    fn tarball(entries: &[(&str, EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, kind, data, link) in entries {
            let mut h = header(path, *kind, data.len() as u64);
            if let Some(link) = link {
                h.set_link_name(link).unwrap();
                h.set_cksum();
            }
            builder.append(&h, *data).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn apply(root: &Path, tar: &[u8]) -> Result<(), UnpackError> {
        apply_layer(root, tar, &UnpackLimits::BUNDLE, &mut UnpackTotals::default())
    }

    #[test]
    fn unpacks_files_dirs_and_inside_links() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tarball(&[
            ("configs/", EntryType::Directory, b"", None),
            ("configs/a/catalog.json", EntryType::Regular, b"{}", None),
            ("configs/link", EntryType::Symlink, b"", Some("a/catalog.json")),
            (
                "configs/hard",
                EntryType::Link,
                b"",
                Some("configs/a/catalog.json"),
            ),
        ]);
        apply(dir.path(), &tar).unwrap();
        assert_eq!(
            fs::read(dir.path().join("configs/a/catalog.json")).unwrap(),
            b"{}"
        );
        assert_eq!(fs::read(dir.path().join("configs/link")).unwrap(), b"{}");
        assert_eq!(fs::read(dir.path().join("configs/hard")).unwrap(), b"{}");
    }

    #[test]
    fn refuses_traversal_and_keeps_escaping_links_inert() {
        let cases: Vec<Vec<u8>> = vec![
            tarball(&[("../evil", EntryType::Regular, b"x", None)]),
            tarball(&[("a/../../evil", EntryType::Regular, b"x", None)]),
            tarball(&[("/etc/evil", EntryType::Regular, b"x", None)]),
            tarball(&[("hard", EntryType::Link, b"", Some("../outside"))]),
            tarball(&[("hard", EntryType::Link, b"", Some("/etc/passwd"))]),
        ];
        for tar in cases {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("root");
            fs::create_dir(&root).unwrap();
            let err = apply(&root, &tar).unwrap_err();
            assert!(matches!(err, UnpackError::PathEscapes { .. }), "{err}");
            assert_eq!(
                fs::read_dir(dir.path()).unwrap().count(),
                1,
                "nothing written beside root"
            );
        }
        // Escaping symbolic links are stored as text and never followed.
        let dir = tempfile::tempdir().unwrap();
        let tar = tarball(&[
            ("a/link", EntryType::Symlink, b"", Some("../../outside")),
            ("abs", EntryType::Symlink, b"", Some("/etc")),
        ]);
        apply(dir.path(), &tar).unwrap();
        assert_eq!(fs::read_link(dir.path().join("abs")).unwrap(), Path::new("/etc"));
    }

    #[test]
    fn refuses_writing_through_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tarball(&[
            ("sub/", EntryType::Directory, b"", None),
            ("ln", EntryType::Symlink, b"", Some("sub")),
            ("ln/file", EntryType::Regular, b"x", None),
        ]);
        let err = apply(dir.path(), &tar).unwrap_err();
        assert!(matches!(err, UnpackError::ThroughSymlink { .. }), "{err}");
    }

    #[test]
    fn whiteouts_remove_earlier_content() {
        let dir = tempfile::tempdir().unwrap();
        let mut totals = UnpackTotals::default();
        let limits = UnpackLimits::BUNDLE;
        let first = tarball(&[
            ("a/one", EntryType::Regular, b"1", None),
            ("a/two", EntryType::Regular, b"2", None),
            ("b/three", EntryType::Regular, b"3", None),
        ]);
        let second = tarball(&[
            ("a/.wh..wh..opq", EntryType::Regular, b"", None),
            ("a/new", EntryType::Regular, b"n", None),
            ("b/.wh.three", EntryType::Regular, b"", None),
        ]);
        apply_layer(dir.path(), first.as_slice(), &limits, &mut totals).unwrap();
        apply_layer(dir.path(), second.as_slice(), &limits, &mut totals).unwrap();
        assert!(!dir.path().join("a/one").exists());
        assert!(!dir.path().join("a/two").exists());
        assert!(dir.path().join("a/new").exists());
        assert!(!dir.path().join("b/three").exists());
        assert!(dir.path().join("b").is_dir());
    }

    #[test]
    fn bounds_size_and_entries_and_skips_devices() {
        let dir = tempfile::tempdir().unwrap();
        let tar = tarball(&[("big", EntryType::Regular, &[0u8; 4096], None)]);
        let limits = UnpackLimits {
            max_total_bytes: 1000,
            max_entries: 10,
            ..UnpackLimits::BUNDLE
        };
        let err = apply_layer(dir.path(), tar.as_slice(), &limits, &mut UnpackTotals::default()).unwrap_err();
        assert!(matches!(err, UnpackError::TooLarge { limit: 1000 }), "{err}");

        let many: Vec<(String, EntryType, &[u8], Option<&str>)> = (0..20)
            .map(|i| (format!("f{i}"), EntryType::Regular, &b""[..], None))
            .collect();
        let many: Vec<(&str, EntryType, &[u8], Option<&str>)> =
            many.iter().map(|(p, k, d, l)| (p.as_str(), *k, *d, *l)).collect();
        let err = apply_layer(
            dir.path(),
            tarball(&many).as_slice(),
            &limits,
            &mut UnpackTotals::default(),
        )
        .unwrap_err();
        assert!(matches!(err, UnpackError::TooManyEntries { limit: 10 }), "{err}");

        let dev = tarball(&[
            ("dev/null", EntryType::Char, b"", None),
            ("ok", EntryType::Regular, b"k", None),
        ]);
        apply(dir.path(), &dev).unwrap();
        assert!(!dir.path().join("dev/null").exists());
        assert!(dir.path().join("ok").exists());
    }

    #[test]
    fn gzip_bomb_is_stopped() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let tar = tarball(&[("bomb", EntryType::Regular, &vec![0u8; 8 << 20], None)]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&tar).unwrap();
        let gz = gz.finish().unwrap();
        assert!(gz.len() < 64 * 1024);
        let limits = UnpackLimits {
            max_total_bytes: 1 << 20,
            max_entries: 100,
            ..UnpackLimits::BUNDLE
        };
        let err = apply_layer(dir.path(), gz.as_slice(), &limits, &mut UnpackTotals::default()).unwrap_err();
        assert!(matches!(err, UnpackError::TooLarge { .. }), "{err}");
        assert!(!dir.path().join("bomb").exists());
    }
}

#[cfg(test)]
mod properties {
    //! Random tar streams and random paths, links and whiteouts never reach outside the root.
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::fs;

    const SECRET: &[u8] = b"outside";

    fn component() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("a".to_string()),
            Just("b".to_string()),
            Just("..".to_string()),
            Just(".".to_string()),
            Just("".to_string()),
            Just(".wh..wh..opq".to_string()),
            Just(".wh.a".to_string()),
            Just(".wh.sentinel".to_string()),
            Just(".wh...".to_string()),
            Just("sentinel".to_string()),
        ]
    }

    fn path() -> impl Strategy<Value = String> {
        (any::<bool>(), prop::collection::vec(component(), 1..5))
            .prop_map(|(absolute, parts)| format!("{}{}", if absolute { "/" } else { "" }, parts.join("/")))
    }

    #[derive(Debug, Clone)]
    struct Entry {
        path: String,
        kind: u8,
        link: String,
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (path(), 0u8..6, path()).prop_map(|(path, kind, link)| Entry { path, kind, link })
    }

    fn raw_tar(entries: &[Entry], sentinel: &Path) -> Vec<u8> {
        let mut out = Vec::new();
        for e in entries {
            let kind = match e.kind {
                0 => EntryType::Regular,
                1 => EntryType::Directory,
                2 => EntryType::Symlink,
                3 => EntryType::Link,
                4 => EntryType::Fifo,
                _ => EntryType::Symlink,
            };
            // Kind 5: a link straight at the sentinel tree beside the root.
            let link = if e.kind == 5 {
                sentinel.display().to_string()
            } else {
                e.link.clone()
            };
            let data: &[u8] = if kind == EntryType::Regular { b"data" } else { b"" };
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            let n = e.path.len().min(99);
            h.as_old_mut().name[..n].copy_from_slice(&e.path.as_bytes()[..n]);
            let l = link.len().min(99);
            h.as_old_mut().linkname[..l].copy_from_slice(&link.as_bytes()[..l]);
            h.set_cksum();
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
        out.extend_from_slice(&[0; 1024]);
        out
    }

    fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let meta = fs::symlink_metadata(&path).unwrap();
                let content = if meta.is_dir() {
                    stack.push(path.clone());
                    b"dir".to_vec()
                } else if meta.file_type().is_symlink() {
                    fs::read_link(&path)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes()
                } else {
                    fs::read(&path).unwrap()
                };
                out.insert(path, content);
            }
        }
        out
    }

    /// A work dir with `root/` and, beside it, `sentinel/` holding a file and a directory.
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let work = tempfile::tempdir().unwrap();
        let sentinel = work.path().join("sentinel");
        fs::create_dir_all(sentinel.join("a/b")).unwrap();
        fs::write(sentinel.join("a/b/sentinel"), SECRET).unwrap();
        fs::write(sentinel.join("sentinel"), SECRET).unwrap();
        let root = work.path().join("a/b/root");
        fs::create_dir_all(&root).unwrap();
        (work, root, sentinel)
    }

    /// Everything under `work` but the root and what is in it.
    fn outside(work: &Path, root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        tree(work)
            .into_iter()
            .filter(|(p, _)| !p.starts_with(root))
            .collect()
    }

    fn check_outside_unchanged(work: &Path, root: &Path, before: &BTreeMap<PathBuf, Vec<u8>>) {
        assert_eq!(&outside(work, root), before);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn random_paths_links_and_whiteouts_never_escape(
            layers in prop::collection::vec(prop::collection::vec(entry(), 1..12), 1..3)
        ) {
            let (work, root, sentinel) = setup();
            let before = outside(work.path(), &root);
            let mut totals = UnpackTotals::default();
            for layer in &layers {
                if apply_layer(&root, raw_tar(layer, &sentinel).as_slice(), &UnpackLimits::BUNDLE, &mut totals).is_err() {
                    break;
                }
            }
            check_outside_unchanged(work.path(), &root, &before);
        }

        #[test]
        fn random_tar_streams_never_escape_or_panic(
            entries in prop::collection::vec(entry(), 1..8),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..16),
            cut in any::<prop::sample::Index>(),
        ) {
            let (work, root, sentinel) = setup();
            let before = outside(work.path(), &root);
            let mut bytes = raw_tar(&entries, &sentinel);
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            bytes.truncate(cut.index(bytes.len()) + 1);
            let _ = apply_layer(&root, bytes.as_slice(), &UnpackLimits::BUNDLE, &mut UnpackTotals::default());
            check_outside_unchanged(work.path(), &root, &before);
        }
    }
}
