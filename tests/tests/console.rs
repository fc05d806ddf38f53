//! The web console at `/ui` on a 3-node cluster: the page and its files under a strict Content
//! Security Policy; `/ui/api/cluster` behind the API's tokens (a reader's is enough); a write
//! method, a foreign Origin and an unknown page refused; and, in headless Chromium (Debian's
//! `chromium`), the members' rows filled in through the DOM, a killed node shown as needing
//! attention, and agent-chosen text never taken as markup.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::process::Command;

use tests::{Cluster, http_get, strand_binary, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw HTTP/1.1 request; answers the whole response.
async fn request(address: &str, head: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(format!("{head}Host: {address}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

/// The page as headless Chromium leaves it once its script ran: its DOM.
fn dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=4000", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .expect("chromium runs (make deps installs it)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_serves_the_cluster_read_only_under_a_strict_policy() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    let address = cluster.endpoints()[0].clone();

    let (status, headers, page) = http_get(&address, "/ui").await;
    assert!(status.contains(" 200 "), "{status}");
    assert!(headers.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{headers}");
    assert!(page.contains("<script src=\"/ui/console.js\" defer></script>") && !page.contains("<script>"), "{page}");
    let (status, _, script) = http_get(&address, "/ui/console.js").await;
    assert!(status.contains(" 200 ") && script.contains("textContent"), "{status}");
    let (status, _, body) = http_get(&address, "/ui/api/cluster").await;
    assert!(status.contains(" 200 "), "{status}");
    let cluster_json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(cluster_json["nodes"].as_array().unwrap().len(), 3, "{cluster_json}");

    // Read-only, same origin only, and an unknown page says where to go.
    let posted = request(&address, "POST /ui/api/cluster HTTP/1.1\r\nContent-Length: 0\r\n").await;
    assert!(posted.starts_with("HTTP/1.1 405") && posted.contains("read-only"), "{posted}");
    let foreign = request(&address, "GET /ui/api/cluster HTTP/1.1\r\nOrigin: http://elsewhere.example\r\n").await;
    assert!(foreign.starts_with("HTTP/1.1 403") && foreign.contains("another origin"), "{foreign}");
    let (status, _, body) = http_get(&address, "/ui/no-such-page").await;
    assert!(status.contains(" 404 ") && body.contains("open /ui"), "{status} {body}");

    // In a browser: the members' rows, and nothing needing attention.
    let url = format!("http://{address}/ui");
    let shown = dom(&url);
    for id in 1..=3 {
        assert!(shown.contains(&format!("id=\"member-{id}\"")), "member {id} not shown: {shown}");
    }
    assert!(shown.contains("Nothing: every member answers and keeps up."), "{shown}");

    // A killed node shows as needing attention.
    let follower = (1..=3).find(|id| *id != leader && *id != 1).unwrap();
    cluster.kill(follower);
    let unreachable = format!("node {follower} is unreachable");
    wait_for("the console to show the killed node", || async { dom(&url).contains(&unreachable).then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_the_console_asks_for_a_token_and_shows_no_data_without_one() {
    let cluster = Cluster::start(1, None);
    cluster.wait_for_leader().await;
    let address = cluster.endpoints()[0].clone();
    let enabled = Command::new(strand_binary())
        .args(["--endpoints", &address, "auth", "enable", "--json"])
        .env_remove("STRAND_TOKEN")
        .env_remove("STRAND_CONFIG")
        .output()
        .unwrap();
    assert!(enabled.status.success(), "{}", String::from_utf8_lossy(&enabled.stderr));
    let (status, _, body) = http_get(&address, "/ui/api/cluster").await;
    assert!(status.contains(" 401 ") && body.contains("token"), "{status} {body}");
    let shown = dom(&format!("http://{address}/ui"));
    assert!(!shown.contains("id=\"login\" hidden"), "the sign-in form shows: {shown}");
    assert!(!shown.contains("id=\"member-1\""), "no data without a token: {shown}");
}
