//! A small forward proxy for tests: `CONNECT host:port` tunnels (https URLs) and absolute-form
//! requests (`GET http://host:port/path`, http URLs) forwarded as origin-form, each noted as
//! the proxy saw it, so a test can tell which requests went through it.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

/// A forward proxy on a loopback port, until dropped.
pub struct ForwardProxy {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// `127.0.0.1:<port>`.
    pub address: String,
    seen: Arc<Mutex<Vec<String>>>,
    stopped: Arc<AtomicBool>,
}

impl ForwardProxy {
    /// Starts the proxy on a free loopback port.
    pub fn start() -> ForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let address = listener.local_addr().expect("the proxy's address").to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let stopped = Arc::new(AtomicBool::new(false));
        let stop = stopped.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let log = log.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &log);
                });
            }
        });
        ForwardProxy {
            url: format!("http://{address}"),
            address,
            seen,
            stopped,
        }
    }

    /// What the proxy was asked so far, in order: `CONNECT host:port` or `GET http://host:port/path`.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests so far whose target names `host_port`.
    pub fn seen_for(&self, host_port: &str) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter(|line| {
                line.contains(&format!(" {host_port}")) || line.contains(&format!("//{host_port}/"))
            })
            .collect()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        // Wakes the accept loop, which then sees it is stopped.
        self.stopped.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.address);
    }
}

/// One client connection: its first request decides the upstream; the rest is copied through.
fn serve(client: TcpStream, log: &Mutex<Vec<String>>) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let end = line == "\r\n" || line == "\n";
        head.push(line);
        if end || head.len() > 200 {
            break;
        }
    }
    let request_line = head[0].trim_end().to_string();
    let mut parts = request_line.split(' ');
    let (method, target, version) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or("HTTP/1.1"),
    );
    log.lock().unwrap().push(format!("{method} {target}"));
    let mut client = client;
    client.set_read_timeout(None)?;
    if method == "CONNECT" {
        let upstream = match TcpStream::connect(target) {
            Ok(upstream) => upstream,
            Err(_) => return client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n"),
        };
        client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")?;
        return pipe(reader, client, upstream);
    }
    let Some(rest) = target.strip_prefix("http://") else {
        return client.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut upstream = match TcpStream::connect(authority) {
        Ok(upstream) => upstream,
        Err(_) => return client.write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n"),
    };
    let mut forwarded = format!("{method} {path} {version}\r\n");
    for line in &head[1..] {
        if !line.to_ascii_lowercase().starts_with("proxy-") {
            forwarded.push_str(line);
        }
    }
    upstream.write_all(forwarded.as_bytes())?;
    pipe(reader, client, upstream)
}

/// Copies both ways until either side closes (what the reader buffered goes first).
fn pipe(
    mut from_client: BufReader<TcpStream>,
    mut client: TcpStream,
    upstream: TcpStream,
) -> std::io::Result<()> {
    let mut to_upstream = upstream.try_clone()?;
    let mut from_upstream = upstream;
    let downstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_upstream, &mut client);
        let _ = client.shutdown(Shutdown::Both);
    });
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from_client.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to_upstream.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to_upstream.shutdown(Shutdown::Write);
    let _ = downstream.join();
    Ok(())
}
