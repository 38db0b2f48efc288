//! `olmv1 resolve` end to end: directories, JSONL files and catalog URLs; text and JSON output;
//! exit status 0/1/2.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpListener,
    path::PathBuf,
    process::{Command, Output},
    thread,
};

fn fixture(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("test/fixtures/resolve/catalogs")
        .join(rel)
        .display()
        .to_string()
}

fn olmv1(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .arg("resolve")
        .args(args)
        .env("RUST_LOG", "off")
        .output()
        .expect("the olmv1 binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn resolves_latest_from_a_directory_in_text() {
    let out = olmv1(&["--catalog", &fixture("stable"), "--package", "example"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    // 3.0.0 is deprecated, so the highest non-deprecated bundle wins.
    assert_eq!(stdout(&out), "example.v2.0.0 2.0.0 stable\n");
}

#[test]
fn json_output_names_bundle_catalog_image_and_deprecation() {
    let out = olmv1(&[
        "--catalog",
        &fixture("stable"),
        "--package",
        "example",
        "--version",
        "3.0.0",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("JSON output");
    assert_eq!(
        v,
        serde_json::json!({
            "bundle": {"name": "example.v3.0.0", "version": "3.0.0"},
            "catalog": "stable",
            "image": "quay.io/example/example-bundle:v3.0.0",
            "deprecated": true
        })
    );
}

#[test]
fn upgrades_follow_edges_and_priorities_break_ties() {
    let args = [
        "--catalog",
        &fixture("stable"),
        "--catalog",
        &fixture("extra.jsonl"),
        "--package",
        "example",
    ];
    let installed = ["--installed", "example.v1.0.0@1.0.0"];
    let out = olmv1(&[&args[..], &installed[..]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error upgrading from currently installed version \"1.0.0\": found bundles for package \"example\" in multiple catalogs with the same priority [extra stable]\n"
    );
    let out = olmv1(&[&args[..], &installed[..], &["--priority", "extra=1"]].concat());
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "example.v2.1.0 2.1.0 extra\n");
    let out = olmv1(
        &[
            &args[..],
            &installed[..],
            &["--priority", "stable=1", "--channel", "stable"],
        ]
        .concat(),
    );
    assert_eq!(stdout(&out), "example.v2.0.0 2.0.0 stable\n");
}

#[test]
fn catalog_names_can_be_given() {
    let out = olmv1(&[
        "--catalog",
        &format!("mine={}", fixture("stable")),
        "--package",
        "other",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "other.v0.1.0 0.1.0 mine\n");
}

#[test]
fn cluster_extension_file_supplies_the_request_and_the_installed_bundle() {
    let out = olmv1(&[
        "-f",
        &fixture("clusterextension.yaml"),
        "--catalog",
        &fixture("stable"),
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "example.v2.0.0 2.0.0 stable\n");
}

#[test]
fn upstream_cluster_extensions_without_service_account_are_read_and_selectors_apply() {
    let out = olmv1(&[
        "-f",
        &fixture("upstream-clusterextension.yaml"),
        "--catalog",
        &fixture("stable"),
        "--catalog",
        &fixture("extra.jsonl"),
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "example.v2.1.0 2.1.0 extra\n");
}

#[test]
fn self_certified_allows_a_downgrade() {
    let base = [
        "--catalog",
        &fixture("stable"),
        "--package",
        "example",
        "--installed",
        "example.v2.0.0@2.0.0",
    ];
    let out = olmv1(&[&base[..], &["--version", "1.0.0"]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error upgrading from currently installed version \"2.0.0\": no bundles found for package \"example\" matching version \"1.0.0\"\n"
    );
    let out = olmv1(
        &[
            &base[..],
            &[
                "--version",
                "1.0.0",
                "--upgrade-constraint-policy",
                "SelfCertified",
            ],
        ]
        .concat(),
    );
    assert_eq!(stdout(&out), "example.v1.0.0 1.0.0 stable\n");
}

#[test]
fn resolution_failures_exit_1_with_the_upstream_message_alone() {
    let out = olmv1(&[
        "--catalog",
        &fixture("stable"),
        "--package",
        "example",
        "--channel",
        "fast",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "no bundles found for package \"example\" in channels [fast]\n"
    );
    assert!(stdout(&out).is_empty());
    let out = olmv1(&[
        "--catalog",
        &fixture("stable"),
        "--package",
        "example",
        "--version",
        "foobar",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "desired version range \"foobar\" is invalid: improper constraint: \"foobar\"\n"
    );
}

#[test]
fn bad_flags_and_unreadable_catalogs_exit_2() {
    let out = olmv1(&["--package", "example"]);
    assert_eq!(out.status.code(), Some(2), "missing --catalog");
    let out = olmv1(&["--catalog", "/nonexistent/catalog", "--package", "example"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/catalog"), "{}", stderr(&out));
    let out = olmv1(&["--catalog", &fixture("stable")]);
    assert_eq!(out.status.code(), Some(2), "missing --package");
    let out = olmv1(&[
        "--catalog",
        &fixture("stable"),
        "--package",
        "example",
        "--installed",
        "nover",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = olmv1(&[
        "--catalog",
        &fixture("stable"),
        "--package",
        "x",
        "--priority",
        "nosuch=1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = olmv1(&[
        "--catalog",
        &fixture("clusterextension.yaml"),
        "--package",
        "example",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a non-catalog file is unreadable as a catalog"
    );
    assert!(stderr(&out).contains("clusterextension.yaml"), "{}", stderr(&out));
}

/// Serves `body` with `status` to each request on a loopback port, recording request paths.
fn serve(status: &'static str, body: Vec<u8>) -> (String, thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let handle = thread::spawn(move || {
        let mut paths = Vec::new();
        if let Ok((mut stream, _)) = listener.accept() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
            let mut line = String::new();
            reader.read_line(&mut line).expect("request line");
            paths.push(line.split_whitespace().nth(1).unwrap_or("").to_string());
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: application/jsonl\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).expect("write head");
            stream.write_all(&body).expect("write body");
        }
        paths
    });
    (format!("http://{addr}/catalogs/remote"), handle)
}

#[test]
fn catalog_urls_are_fetched_from_api_v1_all() {
    let mut body = Vec::new();
    std::fs::File::open(fixture("extra.jsonl"))
        .unwrap()
        .read_to_end(&mut body)
        .unwrap();
    let (url, server) = serve("200 OK", body);
    let out = olmv1(&["--catalog", &url, "--package", "example"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out), "example.v2.1.0 2.1.0 remote\n");
    assert_eq!(
        server.join().unwrap(),
        vec!["/catalogs/remote/api/v1/all".to_string()]
    );
}

#[test]
fn catalog_urls_answering_other_than_200_exit_2() {
    let (url, server) = serve("404 Not Found", b"404 Not Found".to_vec());
    let out = olmv1(&["--catalog", &url, "--package", "example"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("error: received unexpected response status code 404"),
        "{}",
        stderr(&out)
    );
    server.join().unwrap();
}
