//! olmv1: installs and upgrades cluster extensions from file-based catalogs, as OLM v1 does.
// One exception, reviewed: `memory::release_freed_pages` (glibc's `malloc_trim`).
#![deny(unsafe_code)]

pub mod admin;
pub mod api_requests;
pub mod apply;
pub mod backoff;
pub mod bundle;
pub mod catalog;
pub mod cmd;
pub mod components;
pub mod confined;
pub mod controller;
pub mod dependencies;
pub mod egress;
pub mod escape;
pub mod go_format;
pub mod image;
pub mod leader;
pub mod memory;
pub mod meter;
pub mod operations;
pub mod resolve;
pub mod tls_profile;
pub mod version;
pub mod watch;

/// The layers of DESIGN.md's "Shape": a module imports only modules of lower layers.
#[cfg(test)]
mod layers {
    use std::path::Path;

    fn layer(module: &str) -> Option<u8> {
        Some(match module {
            "go_format" | "escape" | "backoff" | "egress" | "tls_profile" | "watch" | "api_requests"
            | "meter" => 0,
            "version" | "image" | "leader" => 1,
            "catalog" => 2,
            "resolve" | "bundle" | "apply" => 3,
            "dependencies" => 4,
            "controller" | "operations" => 5,
            // The admin commands judge as the controller does (its dependency check's view).
            "admin" | "components" => 6,
            "cmd" => 7,
            _ => return None,
        })
    }

    /// The top-level modules a source file names through `crate::`, grouped imports included.
    fn imported(source: &str) -> Vec<String> {
        let path = regex::Regex::new(r"crate::([a-z_]+)").unwrap();
        let group = regex::Regex::new(r"(?s)use crate::\{(.*?)\};").unwrap();
        let head = regex::Regex::new(r"(?:^|[,{])\s*([a-z_]+)\b").unwrap();
        let mut names: Vec<String> = path.captures_iter(source).map(|c| c[1].to_string()).collect();
        for g in group.captures_iter(source) {
            names.extend(head.captures_iter(&g[1]).map(|c| c[1].to_string()));
        }
        names
    }

    fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }

    #[test]
    fn every_import_points_down() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        visit(&src, &mut files);
        let mut upward = Vec::new();
        let mut checked = 0;
        for file in &files {
            let relative = file.strip_prefix(&src).unwrap();
            let Some(own) = relative.iter().next().and_then(|m| m.to_str()).and_then(layer) else {
                continue;
            };
            let module = relative.iter().next().unwrap().to_str().unwrap();
            checked += 1;
            for name in imported(&std::fs::read_to_string(file).unwrap()) {
                if name != module && layer(&name).is_some_and(|l| l >= own) {
                    upward.push(format!("{} imports {name}", relative.display()));
                }
            }
        }
        assert!(
            checked > 50,
            "only {checked} source files found under {}",
            src.display()
        );
        assert!(upward.is_empty(), "imports that do not point down: {upward:#?}");
    }
}
