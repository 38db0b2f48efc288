//! File access confined to one directory, for content that is untrusted (unpacked images,
//! catalogs, bundles).
//!
//! Every path is walked one component at a time from an open directory handle with `O_NOFOLLOW`,
//! so no symbolic link is ever followed, however it was made (chains, `..` hops, absolute
//! targets, links swapped in after a check): nothing outside the directory can be read, written
//! or deleted through it. Reads refuse links and anything but regular files (devices, FIFOs,
//! sockets) and are bounded before they allocate.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// What a directory entry is, seen without following it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link (never followed).
    Symlink,
    /// A device, FIFO or socket.
    Special,
}

/// Why a confined access was refused or failed. Every message names the path.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    /// The path does not exist.
    #[error("{}: not found", path.display())]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// A symbolic link on the way or at the end (links are never followed).
    #[error("{} is a symbolic link, which is not followed", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A file was expected and this is something else.
    #[error("{} is not a regular file", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// A directory was expected and this is something else.
    #[error("{} is not a directory", path.display())]
    NotDirectory {
        /// The path.
        path: PathBuf,
    },
    /// The path leaves the directory (`..`, absolute).
    #[error("{} leaves its directory", path.display())]
    Escapes {
        /// The path.
        path: PathBuf,
    },
    /// The file is larger than the read limit.
    #[error("{} is over the limit of {limit} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The operating system refused.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

impl ConfinedError {
    /// True when the path simply does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ConfinedError::NotFound { .. })
    }
}

/// An open directory; every path given to its methods is relative to it and stays in it.
#[derive(Debug)]
pub struct ConfinedDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl ConfinedDir {
    /// Opens `path` (trusted: chosen by the operator or this program) as the confining directory.
    pub fn open(path: &Path) -> Result<Self, ConfinedError> {
        let fd = rustix::fs::open(path, dir_flags() - OFlags::NOFOLLOW, Mode::empty())
            .map_err(|e| classify(path, e))?;
        Ok(ConfinedDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path this directory was opened as (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the directory `rel` below this one without following any link.
    pub fn open_dir(&self, rel: &Path) -> Result<ConfinedDir, ConfinedError> {
        let mut current = self.try_clone()?;
        for name in normal_components(&self.path, rel)? {
            current = current.child_dir(name)?;
        }
        Ok(current)
    }

    /// What `name` (one component) in this directory is, without following it; `None` if absent.
    pub fn kind_of(&self, name: &OsStr) -> Result<Option<Kind>, ConfinedError> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(kind_of_mode(stat.st_mode))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(self.io(name, e)),
        }
    }

    /// The entries of this directory, sorted by name, each with its kind (links not followed).
    pub fn entries(&self) -> Result<Vec<(OsString, Kind)>, ConfinedError> {
        let dir = rustix::fs::Dir::read_from(&self.fd).map_err(|e| self.io(OsStr::new(""), e))?;
        let mut entries = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| self.io(OsStr::new(""), e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => match self.kind_of(name)? {
                    Some(kind) => kind,
                    None => continue,
                },
                known => kind_of_type(known),
            };
            entries.push((name.to_os_string(), kind));
        }
        entries.sort();
        Ok(entries)
    }

    /// Reads the regular file `rel`, refusing links, non-regular files and files over `limit`
    /// bytes (checked before anything is allocated, and again while reading).
    pub fn read_file(&self, rel: &Path, limit: u64) -> Result<Vec<u8>, ConfinedError> {
        let (parent, name) = self.parent_and_name(rel)?;
        let path = self.path.join(rel);
        match parent.kind_of(name)? {
            None => return Err(ConfinedError::NotFound { path }),
            Some(Kind::Symlink) => return Err(ConfinedError::Symlink { path }),
            Some(Kind::File) => {}
            Some(_) => return Err(ConfinedError::NotRegular { path }),
        }
        // O_NONBLOCK: should a FIFO be swapped in after the check, opening it cannot hang.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd =
            rustix::fs::openat(&parent.fd, name, flags, Mode::empty()).map_err(|e| classify(&path, e))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| classify(&path, e))?;
        if kind_of_mode(stat.st_mode) != Kind::File {
            return Err(ConfinedError::NotRegular { path });
        }
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(ConfinedError::TooLarge { path, limit });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        File::from(fd)
            .take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|source| ConfinedError::Io {
                path: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > limit {
            return Err(ConfinedError::TooLarge { path, limit });
        }
        Ok(bytes)
    }

    /// Opens (creating what is missing) the directory `rel`; non-directories on the way are
    /// replaced, a symbolic link on the way is refused.
    pub fn create_dir_all(&self, rel: &Path) -> Result<ConfinedDir, ConfinedError> {
        let mut current = self.try_clone()?;
        for name in normal_components(&self.path, rel)? {
            match current.kind_of(name)? {
                Some(Kind::Dir) => {}
                Some(Kind::Symlink) => {
                    return Err(ConfinedError::Symlink {
                        path: current.path.join(name),
                    });
                }
                Some(_) => {
                    current.remove_all(name)?;
                    current.create_dir(name)?;
                }
                None => current.create_dir(name)?,
            }
            current = current.child_dir(name)?;
        }
        Ok(current)
    }

    /// Creates the directory `name` here.
    pub fn create_dir(&self, name: &OsStr) -> Result<(), ConfinedError> {
        rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)).map_err(|e| self.io(name, e))
    }

    /// Creates the new regular file `name` here (it must not exist) with `mode`.
    pub fn create_file(&self, name: &OsStr, mode: u32) -> Result<File, ConfinedError> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(mode & 0o7777))
            .map(File::from)
            .map_err(|e| self.io(name, e))
    }

    /// Creates the symbolic link `name` here with the text `target` (stored, never followed).
    pub fn symlink(&self, name: &OsStr, target: &Path) -> Result<(), ConfinedError> {
        rustix::fs::symlinkat(target, &self.fd, name).map_err(|e| self.io(name, e))
    }

    /// Makes `name` here a hard link to the regular file `source_name` of `source_dir`.
    pub fn hard_link(
        &self,
        name: &OsStr,
        source_dir: &ConfinedDir,
        source_name: &OsStr,
    ) -> Result<(), ConfinedError> {
        rustix::fs::linkat(&source_dir.fd, source_name, &self.fd, name, AtFlags::empty())
            .map_err(|e| self.io(name, e))
    }

    /// Sets this directory's permission bits.
    pub fn set_mode(&self, mode: u32) -> Result<(), ConfinedError> {
        rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(mode & 0o7777)).map_err(|e| classify(&self.path, e))
    }

    /// Deletes `name` here, with everything under it when it is a directory; links are removed,
    /// never followed. Absent is fine.
    pub fn remove_all(&self, name: &OsStr) -> Result<(), ConfinedError> {
        match self.kind_of(name)? {
            None => Ok(()),
            Some(Kind::Dir) => {
                let child = self.child_dir(name)?;
                child.clear(|_| false)?;
                rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR).map_err(|e| self.io(name, e))
            }
            Some(_) => rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(|e| self.io(name, e)),
        }
    }

    /// Deletes every entry of this directory for which `keep` is false.
    pub fn clear(&self, keep: impl Fn(&OsStr) -> bool) -> Result<(), ConfinedError> {
        for (name, _) in self.entries()? {
            if !keep(&name) {
                self.remove_all(&name)?;
            }
        }
        Ok(())
    }

    /// Opens the parent directory of `rel` and returns it with the last component.
    pub fn parent_and_name<'a>(&self, rel: &'a Path) -> Result<(ConfinedDir, &'a OsStr), ConfinedError> {
        let components = normal_components(&self.path, rel)?;
        let Some((name, parents)) = components.split_last() else {
            return Err(ConfinedError::NotRegular {
                path: self.path.clone(),
            });
        };
        let mut current = self.try_clone()?;
        for parent in parents {
            current = current.child_dir(parent)?;
        }
        Ok((current, name))
    }

    fn child_dir(&self, name: &OsStr) -> Result<ConfinedDir, ConfinedError> {
        let path = self.path.join(name);
        match rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty()) {
            Ok(fd) => Ok(ConfinedDir { fd, path }),
            // ELOOP / ENOTDIR: say which, from what the entry is.
            Err(e) => Err(match self.kind_of(name) {
                Ok(Some(Kind::Symlink)) => ConfinedError::Symlink { path },
                Ok(Some(Kind::Dir)) | Err(_) => classify(&path, e),
                Ok(Some(_)) => ConfinedError::NotDirectory { path },
                Ok(None) => ConfinedError::NotFound { path },
            }),
        }
    }

    fn try_clone(&self) -> Result<ConfinedDir, ConfinedError> {
        let fd = self
            .fd
            .as_fd()
            .try_clone_to_owned()
            .map_err(|source| ConfinedError::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(ConfinedDir {
            fd,
            path: self.path.clone(),
        })
    }

    fn io(&self, name: &OsStr, e: rustix::io::Errno) -> ConfinedError {
        classify(&self.path.join(name), e)
    }
}

/// The components of `rel`, which must stay below its directory (no `..`, not absolute).
fn normal_components<'a>(base: &Path, rel: &'a Path) -> Result<Vec<&'a OsStr>, ConfinedError> {
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(ConfinedError::Escapes { path: base.join(rel) });
            }
        }
    }
    Ok(names)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn kind_of_mode(mode: u32) -> Kind {
    kind_of_type(FileType::from_raw_mode(mode))
}

fn kind_of_type(file_type: FileType) -> Kind {
    match file_type {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Special,
    }
}

fn classify(path: &Path, e: rustix::io::Errno) -> ConfinedError {
    let path = path.to_path_buf();
    match e {
        rustix::io::Errno::NOENT => ConfinedError::NotFound { path },
        rustix::io::Errno::LOOP => ConfinedError::Symlink { path },
        rustix::io::Errno::NOTDIR => ConfinedError::NotDirectory { path },
        e => ConfinedError::Io {
            path,
            source: io::Error::from(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(dir.path().join("secret"), "host secret").unwrap();
        fs::write(root.join("sub/ok"), "fine").unwrap();
        symlink("../../secret", root.join("sub/up")).unwrap();
        symlink(dir.path(), root.join("abs")).unwrap();
        symlink("/dev/zero", root.join("zero")).unwrap();
        symlink("sub", root.join("inside")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        (dir, root)
    }

    #[test]
    fn reads_never_follow_links_or_open_special_files() {
        let (_dir, root) = setup();
        let confined = ConfinedDir::open(&root).unwrap();
        assert_eq!(confined.read_file(Path::new("sub/ok"), 100).unwrap(), b"fine");
        for link in ["sub/up", "zero", "inside/ok", "abs/secret"] {
            let err = confined.read_file(Path::new(link), 1 << 20).unwrap_err();
            assert!(matches!(err, ConfinedError::Symlink { .. }), "{link}: {err}");
        }
        let err = confined.read_file(Path::new("fifo"), 100).unwrap_err();
        assert!(matches!(err, ConfinedError::NotRegular { .. }), "{err}");
        let err = confined.read_file(Path::new("sub/ok"), 3).unwrap_err();
        assert!(matches!(err, ConfinedError::TooLarge { limit: 3, .. }), "{err}");
        let err = confined.read_file(Path::new("../secret"), 100).unwrap_err();
        assert!(matches!(err, ConfinedError::Escapes { .. }), "{err}");
        assert!(confined.open_dir(Path::new("inside")).is_err());
    }

    #[test]
    fn writes_and_deletes_stay_inside() {
        let (dir, root) = setup();
        let confined = ConfinedDir::open(&root).unwrap();
        let err = confined.create_dir_all(Path::new("abs/new")).unwrap_err();
        assert!(matches!(err, ConfinedError::Symlink { .. }), "{err}");
        confined.remove_all(OsStr::new("abs")).unwrap();
        confined.remove_all(OsStr::new("sub")).unwrap();
        assert!(!root.join("abs").exists());
        assert_eq!(
            fs::read_to_string(dir.path().join("secret")).unwrap(),
            "host secret"
        );
        confined.clear(|_| false).unwrap();
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
