//! The web console at `/ui` on real 3-node clusters, checked over HTTP and in headless Chromium
//! (Debian's `chromium`, driven through the DevTools protocol, `tests::browser`): every page
//! fills in from the cluster (Home, Cluster, a namespace's queues, a bead, Events, Orders), the
//! events page follows the live feed (pause, filter), the page says when leadership moves and
//! when its node goes away, agent text is never markup, unknown namespaces and beads answer 404,
//! writes and foreign origins are refused, every page says it is unavailable when its data calls
//! fail, and with TLS and auth on a token scoped to one namespace sees that one only.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::time::Instant;

use tests::browser::Browser;
use tests::{Cluster, http_get, json_of, strand_as};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw HTTP/1.1 request; answers the whole response.
async fn request(address: &str, head: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(format!("{head}Host: {address}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    String::from_utf8_lossy(&response).into_owned()
}

const NAMESPACE: &str = "web-rig";
/// Its beads' id prefix.
const PREFIX: &str = "web";
/// A title that would run script if any page took it as markup.
const HOSTILE_TITLE: &str = "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">";

/// Creates a bead in [`NAMESPACE`] through the CLI; answers its id.
fn create(cluster: &Cluster, title: &str, extra: &[&str]) -> String {
    let mut args = vec!["--namespace", NAMESPACE, "create", title, "--json"];
    args.extend_from_slice(extra);
    json_of(&strand_as(cluster, "mayor", &args))["id"].as_str().unwrap().to_string()
}

fn cli(cluster: &Cluster, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--namespace", NAMESPACE];
    all.extend_from_slice(args);
    json_of(&strand_as(cluster, "mayor", &all))
}

/// The rows of a table of the page, as the text of their cells.
fn rows(browser: &mut Browser, table: &str) -> Vec<Vec<String>> {
    let script = format!(
        "[...document.querySelectorAll('#{table} tr')].map((row) => [...row.children].map((cell) => cell.textContent))"
    );
    serde_json::from_value(browser.eval(&script)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_the_work_live_and_never_takes_agent_text_as_markup() {
    let mut cluster = Cluster::start(3, None);
    let leader = cluster.wait_for_leader().await;
    // The page talks to node 1 throughout.
    let address = cluster.endpoints()[0].clone();
    let page = |path: &str| format!("http://{address}{path}");

    // Over HTTP: the policy, the files, and what is refused.
    let (status, headers, index) = http_get(&address, "/ui").await;
    assert!(status.contains(" 200 "), "{status}");
    assert!(headers.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{headers}");
    assert!(index.contains("<script src=\"/ui/console.js\" defer></script>") && !index.contains("<script>"), "{index}");
    let posted = request(&address, "POST /ui/api/cluster HTTP/1.1\r\nContent-Length: 0\r\n").await;
    assert!(posted.starts_with("HTTP/1.1 405") && posted.contains("read-only"), "{posted}");
    let deleted = request(&address, &format!("DELETE /ui/api/ns/{NAMESPACE} HTTP/1.1\r\n")).await;
    assert!(deleted.starts_with("HTTP/1.1 405"), "{deleted}");
    let foreign = request(&address, "GET /ui/api/cluster HTTP/1.1\r\nOrigin: http://elsewhere.example\r\n").await;
    assert!(foreign.starts_with("HTTP/1.1 403") && foreign.contains("another origin"), "{foreign}");
    let (status, _, body) = http_get(&address, "/ui/no-such-page").await;
    assert!(status.contains(" 404 ") && body.contains("open /ui"), "{status} {body}");

    json_of(&strand_as(&cluster, "mayor", &["namespace", "create", NAMESPACE, "--prefix", PREFIX, "--json"]));
    // The work: two beads routed to pool web (one titled to attack the page), one that waits for
    // the first, a leased claim, an order that fired once.
    let first = create(&cluster, "first", &["--labels", "pool:web"]);
    let hostile = create(&cluster, HOSTILE_TITLE, &["--labels", "pool:web"]);
    let waiting = create(&cluster, "waits for first", &[]);
    cli(&cluster, &["dep", "add", &waiting, &first, "--type", "blocks", "--json"]);
    let claimed = json_of(&strand_as(
        &cluster,
        "polecat",
        &["--namespace", NAMESPACE, "claim", &hostile, "--lease", "10m", "--json"],
    ));
    assert_eq!(claimed["assignee"], "polecat", "{claimed}");
    let formula = cluster.dir().join("patrol.toml");
    std::fs::write(&formula, "formula = \"patrol\"\n[[steps]]\nid = \"look\"\ntitle = \"Look around\"\n").unwrap();
    cli(&cluster, &["formula", "put", formula.to_str().unwrap(), "--json"]);
    let order = cluster.dir().join("patrol-sweep.toml");
    // Manual: the controller never fires it, so it fires once, when run.
    std::fs::write(&order, "[order]\nformula = \"patrol\"\ngate = \"manual\"\npool = \"dog\"\n").unwrap();
    cli(&cluster, &["order", "put", order.to_str().unwrap(), "--json"]);
    cli(&cluster, &["order", "run", "patrol-sweep", "--json"]);

    // Unknown namespaces and beads: 404 with what was not found.
    let (status, _, body) = http_get(&address, "/ui/api/ns/no-such-rig").await;
    assert!(status.contains(" 404 ") && body.contains("no-such-rig"), "{status} {body}");
    let (status, _, body) = http_get(&address, &format!("/ui/api/ns/{NAMESPACE}/beads/{PREFIX}-999")).await;
    assert!(status.contains(" 404 ") && body.contains("999"), "{status} {body}");

    let mut browser = Browser::start();
    // Home: calm, and the namespace to go to.
    browser.open(&page("/ui"));
    let home = browser.wait_for_text("Nothing: every member answers");
    assert!(home.contains(NAMESPACE), "{home}");

    // Cluster: a row per member, the controller and its duties.
    browser.open(&page("/ui/cluster"));
    browser.wait_for_text("The controller runs on node");
    // Every member answers its status (one slow to answer shows UNKNOWN until the next poll).
    browser.wait_until("three members, each SERVING", |browser| {
        let members = rows(browser, "members");
        (members.len() == 3 && members.iter().all(|row| row[4] == "SERVING")).then_some(())
    });
    // The duties are listed once the controller has begun; the page polls until they show.
    browser.wait_for_text("lease_sweep");
    assert!(rows(&mut browser, "duties").iter().any(|row| row[0] == "lease_sweep"));

    // The namespace: ready work by pool, who holds what, the lease, the hostile title as text.
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}")));
    let shown = browser.wait_for_text("Ready by pool");
    assert!(rows(&mut browser, "by-pool").contains(&vec!["web".to_string(), "1".to_string()]), "{shown}");
    assert!(rows(&mut browser, "holders").contains(&vec!["polecat".to_string(), "1".to_string()]), "{shown}");
    assert_eq!(rows(&mut browser, "leases")[0][0], hostile, "{shown}");
    assert!(shown.contains("1 held, 0 lapse within 1m"), "{shown}");
    // A bead created through the CLI appears in its queue.
    let created_at = Instant::now();
    let fresh = create(&cluster, "fresh arrival", &["--labels", "pool:web"]);
    browser.wait_for_text(&fresh);
    eprintln!("a new bead appeared in its queue {:?} after the CLI returned", created_at.elapsed());

    // A bead: the hostile title as text, its dependents and events; its dependency as a link.
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}/beads/{hostile}")));
    let shown = browser.wait_for_text("Held by polecat");
    assert!(shown.contains(HOSTILE_TITLE), "the title shows as text: {shown}");
    assert_eq!(browser.eval("window.pwned === undefined"), true, "agent text ran as script");
    assert!(browser.html().contains("&lt;script&gt;window.pwned = 1&lt;/script&gt;"));
    let events = rows(&mut browser, "bead-events");
    assert!(events.iter().any(|row| row[2] == "bead.claimed" && row[3] == "polecat"), "{events:?}");
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}/beads/{waiting}")));
    browser.wait_for_text("Depends on");
    assert_eq!(rows(&mut browser, "dependencies")[0][0], first);
    let href = browser.eval("document.querySelector('#dependencies a').getAttribute('href')");
    assert_eq!(href, format!("/ui/ns/{NAMESPACE}/beads/{first}"));

    // Orders: the trigger and the firing's tracking bead.
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}/orders")));
    browser.wait_for_text("patrol-sweep");
    let orders = rows(&mut browser, "orders");
    assert!(orders[0][1] == "manual" && orders[0][4] == "1", "{orders:?}");
    let runs = rows(&mut browser, "runs");
    assert!(runs[0][0] == "patrol-sweep" && runs[0][1].starts_with(&format!("{PREFIX}-")), "{runs:?}");

    // Events: live through the feed (this page never reloads), paused, filtered.
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}/events")));
    browser.wait_for_text("bead.created");
    let live = create(&cluster, "live event bead", &[]);
    browser.wait_for_text("live event bead");
    browser.eval("document.getElementById('pause').click(); true");
    let held = create(&cluster, "held while paused", &[]);
    browser.wait_for_text("Paused: 1 new events held");
    assert!(!browser.text().contains("held while paused"));
    browser.eval("document.getElementById('pause').click(); true");
    browser.wait_for_text("held while paused");
    browser.eval("const f = document.getElementById('filter'); f.value = 'bead.claimed'; f.dispatchEvent(new Event('change')); true");
    let claims = rows(&mut browser, "events");
    assert!(!claims.is_empty() && claims.iter().all(|row| row[2] == "bead.claimed"), "{claims:?}");
    assert!(!claims.iter().any(|row| row[4] == live || row[4] == held), "{claims:?}");

    // Unknown pages of the namespace say what was not found.
    browser.open(&page("/ui/ns/no-such-rig"));
    assert!(browser.wait_for_text("Not found").contains("no-such-rig"));
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}/beads/{PREFIX}-999")));
    browser.wait_for_text("Not found");

    // Readable on a phone: the page never scrolls sideways (wide tables scroll in their box).
    browser.set_width(390);
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}")));
    browser.wait_for_text("Ready by pool");
    assert_eq!(browser.eval("document.documentElement.scrollWidth <= 390"), true);
    browser.set_width(1280);

    // Leadership moves: the page says so.
    let target = (1..=3).find(|id| *id != leader).unwrap();
    json_of(&strand_as(&cluster, "mayor", &["cluster", "move-leader", &target.to_string(), "--json"]));
    browser.wait_for_text("Leadership moved");

    // A killed member shows on Home.
    let victim = (2..=3).next().unwrap();
    cluster.kill(victim);
    browser.open(&page("/ui"));
    browser.wait_for_text(&format!("node {victim} is unreachable"));

    // The page's own node goes away: its figures go, and it says so.
    browser.open(&page(&format!("/ui/ns/{NAMESPACE}")));
    browser.wait_for_text("Ready by pool");
    cluster.kill(1);
    let gone = browser.wait_for_text("unavailable");
    assert!(!gone.contains("Ready by pool") && !gone.contains(&first), "no stale figures: {gone}");
    browser.wait_for_text("live feed from this node stopped");
    // It comes back: the page reconnects and shows the figures again.
    cluster.restart(1);
    browser.wait_for_text("Ready by pool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_data_calls_failing_every_page_says_it_is_unavailable() {
    let mut cluster = Cluster::start(3, None);
    cluster.wait_for_leader().await;
    json_of(&strand_as(&cluster, "mayor", &["namespace", "create", NAMESPACE, "--prefix", PREFIX, "--json"]));
    let bead = create(&cluster, "some work", &[]);
    let address = cluster.endpoints()[0].clone();
    let pages = [
        format!("/ui/ns/{NAMESPACE}"),
        format!("/ui/ns/{NAMESPACE}/beads/{bead}"),
        format!("/ui/ns/{NAMESPACE}/events"),
        format!("/ui/ns/{NAMESPACE}/orders"),
    ];
    // Node 1 keeps serving the pages; with no quorum behind it, no read can be linearized.
    cluster.kill(2);
    cluster.kill(3);
    let mut browsers: Vec<Browser> = pages.iter().map(|_| Browser::start()).collect();
    let mut home = Browser::start();
    for (browser, path) in browsers.iter_mut().zip(&pages) {
        browser.open(&format!("http://{address}{path}"));
    }
    home.open(&format!("http://{address}/ui"));
    for (browser, path) in browsers.iter_mut().zip(&pages) {
        let shown = browser.wait_for_text("This page's data is unavailable");
        assert!(!shown.contains("some work") && !shown.contains("Ready by pool"), "{path}: {shown}");
    }
    // Home answers from the members' own status, and says the queues' figures are unavailable.
    let shown = home.wait_for_text("figures are unavailable");
    assert!(shown.contains("node 2 is unreachable") && !shown.contains("Nothing: every member"), "{shown}");
    home.wait_until("the home page to say it is degraded", |home| {
        (home.eval("document.getElementById('connection').textContent") == "degraded").then_some(())
    });
}

/// `strand` over TLS with `token` (or none); answers the JSON it printed.
fn strand_tls(cluster: &Cluster, token: Option<&str>, args: &[&str]) -> serde_json::Value {
    json_of(&tests::strand_tls(cluster, token, args))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_with_auth_a_token_scoped_to_one_namespace_sees_that_one_only() {
    let cluster = Cluster::start_tls(3, false);
    cluster.wait_for_leader().await;
    let admin = strand_tls(&cluster, None, &["auth", "enable", "--json"])["token"].as_str().unwrap().to_string();
    for namespace in ["alpha", "hidden-beta"] {
        strand_tls(&cluster, Some(&admin), &["namespace", "create", namespace, "--prefix", "ns", "--json"]);
        strand_tls(
            &cluster,
            Some(&admin),
            &["--namespace", namespace, "create", &format!("{namespace} work"), "--json"],
        );
    }
    let reader = strand_tls(
        &cluster,
        Some(&admin),
        &["auth", "token", "create", "watcher", "--role", "reader", "--namespace", "alpha", "--json"],
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let page = |path: &str| format!("https://{}{path}", cluster.endpoints()[0]);

    let mut browser = Browser::start();
    // No token: the sign-in form and no data.
    browser.open(&page("/ui"));
    let shown = browser.wait_for_text("Sign in");
    assert!(!shown.contains("alpha") && !shown.contains("Needs attention"), "{shown}");
    // A token the cluster does not know is refused, and still no data.
    browser.sign_in("strand_not-a-token-the-cluster-knows");
    browser.wait_until("the refusal", |browser| {
        let error = browser.eval("document.getElementById('login-error').textContent");
        (!error.as_str().unwrap_or_default().is_empty()).then_some(())
    });
    assert!(!browser.text().contains("alpha"));
    // The scoped reader: its namespace, and not even the other's name.
    browser.sign_in(&reader);
    let home = browser.wait_for_text("Needs attention");
    assert!(home.contains("alpha") && !home.contains("hidden-beta"), "{home}");
    browser.open(&page("/ui/ns/alpha"));
    browser.wait_for_text("Ready by pool");
    browser.open(&page("/ui/ns/alpha/events"));
    browser.wait_for_text("alpha work");
    strand_tls(&cluster, Some(&admin), &["--namespace", "alpha", "create", "arrives over tls", "--json"]);
    browser.wait_for_text("arrives over tls");
    browser.open(&page("/ui/ns/hidden-beta"));
    let refused = browser.wait_for_text("Not allowed");
    assert!(!refused.contains("hidden-beta work"), "{refused}");
    browser.open(&page("/ui/cluster"));
    browser.wait_for_text("The controller runs on node");
    // Signing out forgets the token.
    browser.eval("document.getElementById('sign-out').click(); true");
    browser.wait_for_text("Sign in");
    assert_eq!(browser.eval("sessionStorage.getItem('strand-token')"), serde_json::Value::Null);
}
