//! Safe application of image layers (tar, gzip-compressed or not) onto a directory.
//!
//! Layers are untrusted: entries that would land outside the root (`..`, absolute paths), links
//! pointing outside it, and writes through symbolic links are refused; device files and FIFOs are
//! skipped; the total uncompressed size and the number of entries are bounded (decompression
//! bombs). Whiteouts (`.wh.<name>`, `.wh..wh..opq`) delete what earlier layers created.

use std::collections::HashSet;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use tar::EntryType;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";
// Headroom for tar headers, padding and PAX records over the file-content budget.
const STREAM_OVERHEAD_BYTES: u64 = 64 << 20;

/// Bounds on what unpacking an image may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Total bytes of file content over all layers.
    pub max_total_bytes: u64,
    /// Total number of tar entries over all layers.
    pub max_entries: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_total_bytes: 4 << 30,
            max_entries: 1_000_000,
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
    /// A symbolic or hard link points outside the root.
    #[error("link {entry:?} points outside the unpack root (target {target:?})")]
    LinkEscapes {
        /// The link's path.
        entry: String,
        /// Its target as written in the archive.
        target: String,
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
    /// The layer is compressed with an algorithm this build cannot read.
    #[error("layer is compressed with {0}, which is not supported (gzip or uncompressed tar only)")]
    UnsupportedCompression(&'static str),
    /// The archive is truncated or malformed.
    #[error("reading the archive: {0}")]
    Read(#[source] io::Error),
    /// Writing to the target directory failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The path being written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
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
    let capped = CappedReader {
        inner: decompressed,
        remaining: budget,
        limit: limits.max_total_bytes,
    };
    apply_tar(root, capped, limits, totals)
}

/// A reader that fails once more than `remaining` bytes were read: a gzip bomb stops here
/// even when its tar headers lie.
struct CappedReader<R> {
    inner: R,
    remaining: u64,
    limit: u64,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.remaining {
            return Err(io::Error::other(UnpackError::TooLarge { limit: self.limit }));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

fn apply_tar(
    root: &Path,
    reader: impl Read,
    limits: &UnpackLimits,
    totals: &mut UnpackTotals,
) -> Result<(), UnpackError> {
    let mut archive = tar::Archive::new(reader);
    let mut created_in_layer: HashSet<PathBuf> = HashSet::new();
    let mut opaque_dirs: Vec<PathBuf> = Vec::new();
    for entry in archive.entries().map_err(read_error)? {
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
        let file_name = rel
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let parent_rel = rel.parent().map(Path::to_path_buf).unwrap_or_default();

        if file_name == OPAQUE_WHITEOUT {
            check_no_symlink_ancestors(root, &rel, &shown)?;
            opaque_dirs.push(parent_rel);
            continue;
        }
        if let Some(hidden) = file_name.strip_prefix(WHITEOUT_PREFIX) {
            if hidden.is_empty() || hidden == "." || hidden == ".." {
                return Err(UnpackError::InvalidWhiteout { entry: shown });
            }
            let target_rel = parent_rel.join(hidden);
            check_no_symlink_ancestors(root, &target_rel, &shown)?;
            remove_any(&root.join(&target_rel))?;
            continue;
        }

        let entry_type = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o644);
        let target = root.join(&rel);
        match entry_type {
            EntryType::Directory => {
                ensure_parent_dirs(root, &rel, &shown)?;
                match fs::symlink_metadata(&target) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        remove_any(&target)?;
                        create_dir(&target)?;
                    }
                    Err(_) => create_dir(&target)?,
                }
                let perms = fs::Permissions::from_mode((mode & 0o777) | 0o700);
                fs::set_permissions(&target, perms).map_err(|e| write_error(&target, e))?;
            }
            EntryType::Regular | EntryType::Continuous => {
                let size = entry.header().size().map_err(read_error)?;
                if totals.bytes.saturating_add(size) > limits.max_total_bytes {
                    return Err(UnpackError::TooLarge {
                        limit: limits.max_total_bytes,
                    });
                }
                ensure_parent_dirs(root, &rel, &shown)?;
                remove_any(&target)?;
                let mut file = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode((mode & 0o777) | 0o600)
                    .open(&target)
                    .map_err(|e| write_error(&target, e))?;
                let written = io::copy(&mut entry, &mut file).map_err(read_error)?;
                totals.bytes += written;
            }
            EntryType::Symlink => {
                let link = entry
                    .link_name()
                    .map_err(read_error)?
                    .unwrap_or_default()
                    .into_owned();
                if !symlink_stays_inside(&parent_rel, &link) {
                    return Err(UnpackError::LinkEscapes {
                        entry: shown,
                        target: link.display().to_string(),
                    });
                }
                ensure_parent_dirs(root, &rel, &shown)?;
                remove_any(&target)?;
                std::os::unix::fs::symlink(&link, &target).map_err(|e| write_error(&target, e))?;
            }
            EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(read_error)?
                    .unwrap_or_default()
                    .into_owned();
                let escapes = || UnpackError::LinkEscapes {
                    entry: shown.clone(),
                    target: link.display().to_string(),
                };
                let source_rel = clean_relative(&link).ok_or_else(escapes)?.ok_or_else(escapes)?;
                check_no_symlink_ancestors(root, &source_rel, &shown)?;
                let source = root.join(&source_rel);
                match fs::symlink_metadata(&source) {
                    Ok(meta) if meta.is_file() => {}
                    _ => {
                        return Err(UnpackError::BadHardlink {
                            entry: shown,
                            target: link.display().to_string(),
                        });
                    }
                }
                ensure_parent_dirs(root, &rel, &shown)?;
                if source != target {
                    remove_any(&target)?;
                    fs::hard_link(&source, &target).map_err(|e| write_error(&target, e))?;
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
    for dir in opaque_dirs {
        clear_opaque_dir(root, &dir, &created_in_layer)?;
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

/// True when `target`, resolved lexically from the link's directory, stays inside the root.
fn symlink_stays_inside(link_dir: &Path, target: &Path) -> bool {
    let mut depth: usize = link_dir.components().count();
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Creates the missing ancestors of `rel` as directories; refuses to pass through a symlink and
/// replaces non-directories on the way.
fn ensure_parent_dirs(root: &Path, rel: &Path, shown: &str) -> Result<(), UnpackError> {
    let mut current = root.to_path_buf();
    let Some(parent) = rel.parent() else { return Ok(()) };
    for component in parent.components() {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(UnpackError::ThroughSymlink {
                    entry: shown.to_string(),
                    link: current
                        .strip_prefix(root)
                        .unwrap_or(&current)
                        .display()
                        .to_string(),
                });
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                remove_any(&current)?;
                create_dir(&current)?;
            }
            Err(_) => create_dir(&current)?,
        }
    }
    Ok(())
}

fn check_no_symlink_ancestors(root: &Path, rel: &Path, shown: &str) -> Result<(), UnpackError> {
    let mut current = root.to_path_buf();
    let Some(parent) = rel.parent() else { return Ok(()) };
    for component in parent.components() {
        current.push(component);
        if let Ok(meta) = fs::symlink_metadata(&current)
            && meta.file_type().is_symlink()
        {
            return Err(UnpackError::ThroughSymlink {
                entry: shown.to_string(),
                link: current
                    .strip_prefix(root)
                    .unwrap_or(&current)
                    .display()
                    .to_string(),
            });
        }
    }
    Ok(())
}

/// Deletes what earlier layers put in `dir` (the layer's own entries stay).
fn clear_opaque_dir(root: &Path, dir: &Path, keep: &HashSet<PathBuf>) -> Result<(), UnpackError> {
    let abs = root.join(dir);
    let entries = match fs::read_dir(&abs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(write_error(&abs, e)),
    };
    for child in entries {
        let child = child.map_err(|e| write_error(&abs, e))?;
        let child_rel = dir.join(child.file_name());
        if !keep.contains(&child_rel) {
            remove_any(&child.path())?;
        }
    }
    Ok(())
}

fn remove_any(path: &Path) -> Result<(), UnpackError> {
    let result = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    result.map_err(|e| write_error(path, e))
}

fn create_dir(path: &Path) -> Result<(), UnpackError> {
    fs::create_dir(path).map_err(|e| write_error(path, e))
}

fn write_error(path: &Path, source: io::Error) -> UnpackError {
    UnpackError::Write {
        path: path.to_path_buf(),
        source,
    }
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
        apply_layer(root, tar, &UnpackLimits::default(), &mut UnpackTotals::default())
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
    fn refuses_traversal_absolute_and_link_escapes() {
        let cases: Vec<Vec<u8>> = vec![
            tarball(&[("../evil", EntryType::Regular, b"x", None)]),
            tarball(&[("a/../../evil", EntryType::Regular, b"x", None)]),
            tarball(&[("/etc/evil", EntryType::Regular, b"x", None)]),
            tarball(&[("a/link", EntryType::Symlink, b"", Some("../../outside"))]),
            tarball(&[("link", EntryType::Symlink, b"", Some("/etc"))]),
            tarball(&[("hard", EntryType::Link, b"", Some("../outside"))]),
            tarball(&[("hard", EntryType::Link, b"", Some("/etc/passwd"))]),
        ];
        for tar in cases {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("root");
            fs::create_dir(&root).unwrap();
            let err = apply(&root, &tar).unwrap_err();
            assert!(
                matches!(
                    err,
                    UnpackError::PathEscapes { .. } | UnpackError::LinkEscapes { .. }
                ),
                "{err}"
            );
            assert_eq!(
                fs::read_dir(dir.path()).unwrap().count(),
                1,
                "nothing written beside root"
            );
        }
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
        let limits = UnpackLimits::default();
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
        };
        let err = apply_layer(dir.path(), gz.as_slice(), &limits, &mut UnpackTotals::default()).unwrap_err();
        assert!(matches!(err, UnpackError::TooLarge { .. }), "{err}");
        assert!(!dir.path().join("bomb").exists());
    }
}
